"""Write a set of files on the node all or nothing, purge their bytecode, verify by hash.

Apply and revert are both one ordered list of writes (backups, the record and the targets;
None meaning "absent"). Each file is replaced atomically (`node.put` renames a temporary
file); if any step fails, every file already written gets its previous bytes back (or is
removed again), newest first, and one PatchError says what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from firedup.config.inventory import HostSpec
from firedup.errors import DeployError, PatchError
from firedup.node.base import Node
from firedup.patching.record import digest
from firedup.patching.target import settle


@dataclass(frozen=True)
class Write:
    path: str
    old: bytes | None  # what is there now (None: nothing), restored on failure
    new: bytes | None  # what to leave there (None: remove it)
    mode: int | None = None


def _put(node: Node, path: str, data: bytes | None, mode: int | None) -> None:
    if data is None:
        node.run(["rm", "-f", "--", path], what=f"remove {path}")
    else:
        node.put(data, path, mode=mode if mode is not None else 0o644)


def _settle(
    node: Node, host: HostSpec, env: dict[str, str], want: dict[str, bytes | None]
) -> tuple[str, ...]:
    """Purge bytecode of what was written and check every file holds exactly `want`."""
    purged: list[str] = []
    for settled in settle(node, host, env, list(want)):
        if settled.errors:
            raise PatchError(f"{settled.path}: {'; '.join(settled.errors)}")
        if settled.sha256 != digest(want[settled.path]):
            raise PatchError(f"{settled.path}: content on the node differs from what was written")
        purged.extend(settled.purged)
    return tuple(purged)


def write_all(
    node: Node,
    host: HostSpec,
    env: dict[str, str],
    writes: Sequence[Write],
    *,
    on_progress: Callable[[str], None],
) -> tuple[str, ...]:
    """Perform `writes` in order, all or nothing; return the stale .pyc files removed."""
    done: list[Write] = []
    try:
        for w in writes:
            on_progress(f"writing {w.path}")
            done.append(w)
            _put(node, w.path, w.new, w.mode)
        return _settle(node, host, env, {w.path: w.new for w in writes})
    except BaseException as exc:
        problem = _rollback(node, host, env, done)
        if not isinstance(exc, DeployError):
            raise
        raise PatchError(
            f"{exc.message}; {problem or 'every file was restored, nothing changed'}",
            hint=exc.hint,
        ) from exc


def _rollback(node: Node, host: HostSpec, env: dict[str, str], done: list[Write]) -> str | None:
    """Undo `done`, newest first; describe what could not be undone (None: all was)."""
    try:
        for w in reversed(done):
            _put(node, w.path, w.old, w.mode)
        _settle(node, host, env, {w.path: w.old for w in done})
    except DeployError as exc:
        return (
            f"ROLLBACK INCOMPLETE ({exc.message}); the node's record lists the originals, "
            "run `fab sync-patches --revert` once the node is reachable"
        )
    return None
