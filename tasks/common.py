"""What every task shares: inventory lookup, node opening, and errors turned into exits.

Precedence: CLI flag > config (fabric.yaml `firedup:` section, FIREDUP_* env) > default.
Expected failures (DeployError) print one clear message and exit with their code, no
traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import fabric
from invoke.context import Context
from invoke.exceptions import Exit

from firedup.config.inventory import Inventory, load_inventory
from firedup.config.secrets import learn_secrets
from firedup.errors import DeployError, UsageError
from firedup.node.base import Node
from firedup.node.gate import CONNECTING, DEFAULT_CONNECTING
from firedup.node.ssh import open_node
from firedup.ops.results import HostResults

from .shown import shown

T = TypeVar("T")

# Options that must never be typed by accident: no short flag (invoke would give
# --force-unlock `-o` on deploy, where -f is --follow, and `-f` on stop; --raw lets escape
# sequences through to the terminal).
LONG_ONLY = frozenset({"force_unlock", "force", "raw"})


class FiredupTask(fabric.Task):
    """A fab task whose LONG_ONLY options have no short flag."""

    def arg_opts(self, name: str, default: Any, taken_names: set[str]) -> dict[str, Any]:
        opts: dict[str, Any] = super().arg_opts(name, default, taken_names)
        if name in LONG_ONLY:
            opts["names"] = opts["names"][:1]
        return opts


def task(*args: Any, **kwargs: Any) -> Any:
    """fabric's @task, with FiredupTask."""
    kwargs.setdefault("klass", FiredupTask)
    return fabric.task(*args, **kwargs)


HOST_HELP = "inventory host name (see your inventory file)"
INVENTORY_HELP = (
    "inventory file (default: $FIREDUP_INVENTORY, then inventory/hosts.yaml or firedup.yaml here "
    "or in a parent directory, then ~/.config/firedup/hosts.yaml)"
)


def _config(c: Context, key: str) -> Any:
    section = c.config.get("firedup", None) if hasattr(c, "config") else None
    return section.get(key) if section else None


def get_inventory(c: Context, path: str | None) -> Inventory:
    return load_inventory(path or _config(c, "inventory"))


def require_host(task: str, host: str | None) -> str:
    if not host:
        raise UsageError(f"{task}: --host NAME is required")
    return host


def connect(c: Context, inventory: Inventory, name: str) -> Node:
    spec = inventory.host(name)
    # What comes back from the node (logs, status, history) is masked with every secret of
    # the host's deployment this machine can resolve, not only those this process deployed.
    learn_secrets(inventory.deployment_for(spec))
    config = getattr(c, "config", None)
    if spec.transport == "ssh" and config is not None and hasattr(config, "connect_kwargs"):
        return open_node(spec, config=config)
    return open_node(spec)


@contextmanager
def connected(c: Context, inventory: Inventory, name: str) -> Iterator[Node]:
    """The host's node for the block, closed after it whatever happens."""
    node = connect(c, inventory, name)
    try:
        yield node
    finally:
        node.close()


# `fab status | head -2`: the reader left; like any Unix tool, stop quietly (128 + SIGPIPE).
PIPE_CLOSED_EXIT = 141


@contextmanager
def reporting() -> Iterator[None]:
    """Turn expected failures into one message on stderr and the error's exit code."""
    try:
        yield
    except DeployError as exc:
        raise Exit(fitted(shown(f"firedup: {exc}"), sys.stderr), code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("firedup: interrupted", code=130) from None
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's last flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise Exit(code=PIPE_CLOSED_EXIT) from None


def number(option: str, value: object, default: float, *, minimum: float = 0) -> float:
    """An option's number, checked here: invoke's own int()/float() would end in a traceback.

    `value` is what invoke handed over (a string, or None when the option was not given)."""
    if value is None:
        return default
    try:
        parsed = float(str(value))
    except ValueError:
        raise UsageError(f"--{option}: expected a number, got {value!r}") from None
    if not parsed >= minimum or parsed == float("inf"):  # NaN fails every comparison
        raise UsageError(f"--{option} must be a number of at least {minimum:g}, got {value!r}")
    return parsed


def whole(option: str, value: object, default: int, *, minimum: int = 0) -> int:
    """A whole-number option (lines, seconds), checked like `number`."""
    parsed = number(option, value, default, minimum=minimum)
    if parsed != int(parsed):
        raise UsageError(f"--{option}: expected a whole number, got {value!r}")
    return int(parsed)


def fitted(text: str, stream: TextIO) -> str:
    """On a terminal, each line broken to its width (continuations indented): the terminal
    never wraps our lines. Anywhere else, the text as it is."""
    if not stream.isatty():
        return text
    width = max(20, shutil.get_terminal_size().columns - 1)
    return "\n".join(
        textwrap.fill(
            line,
            width=width,
            subsequent_indent=" " * (len(line) - len(line.lstrip()) + 2),
            break_on_hyphens=False,
        )
        or line
        for line in text.splitlines()
    )


MAX_PARALLEL_HELP = (
    "hosts in their SSH handshake at once (default 8, or firedup.max_parallel in fabric.yaml; "
    "a bastion's sshd drops connections past its MaxStartups, 10 by default)"
)


def limit_connecting(c: Context, flag: int = 0) -> None:
    """How many hosts connect at once: --max-parallel > config max_parallel > default."""
    size = int(flag or _config(c, "max_parallel") or DEFAULT_CONNECTING)
    if size < 1:
        raise UsageError(f"--max-parallel must be at least 1, not {size}")
    CONNECTING.resize(size)


def say(message: str) -> None:
    print(shown(message), flush=True)


def progress(host: str) -> Callable[[str], None]:
    """Progress goes to stderr, so stdout stays clean for --json and scripts."""

    def report(message: str) -> None:
        print(shown(f"[{host}] {message}"), file=sys.stderr, flush=True)

    return report


def per_host(names: list[str], work: Callable[[str], T]) -> HostResults[T]:
    """Run `work` for each host in parallel; a failure on one never hides another's outcome.

    One host runs in the calling thread. Several run in daemon threads, so that Ctrl-C
    reaches the caller at once (KeyboardInterrupt) instead of waiting for every host's wait
    to end; what a thread started on a node (a detached server) is not touched by that.
    """
    if len(names) == 1:
        return HostResults({names[0]: _capture(work, names[0])})
    results: dict[str, T | DeployError] = {}
    bugs: list[BaseException] = []

    def one(name: str) -> None:
        try:
            results[name] = _capture(work, name)
        except BaseException as exc:  # a bug: re-raised below with its own traceback
            bugs.append(exc)

    threads = [
        threading.Thread(target=one, args=(name,), name=f"firedup-{name}", daemon=True)
        for name in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.2)
    if bugs:
        raise bugs[0]
    return HostResults({name: results[name] for name in names})


def exit_by_rule(results: HostResults[Any]) -> None:
    """End a command run on several hosts by the one rule (docs/exit-codes.md): invoke's Exit
    with the failures' shared code (1 when they differ), naming the hosts that failed."""
    if results.exit_code:
        raise Exit(shown(f"firedup: {results.summary()}"), code=results.exit_code)


def _capture(work: Callable[[str], T], name: str) -> T | DeployError:
    try:
        return work(name)
    except DeployError as exc:
        return exc
