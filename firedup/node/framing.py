"""Framing of firedup's own remote output, so a chatty login shell is never parsed as data.

sshd runs every command through the login user's shell (`$SHELL -c LINE`), and that shell
first reads startup files: a `~/.bashrc`, `~/.zshenv` or `config.fish` that prints a banner or
a conda notice puts it in front of our output. So the line sent is a fixed wrapper that any
shell (bash, zsh, fish, dash, csh) parses alike: `exec /bin/sh -c '<wrapper>' firedup MARK B64`
(no backslash, no single quote, one line). The wrapper prints a marker unique to this call on
stdout and stderr, decodes the real command (shlex-joined argv, base64: only [A-Za-z0-9+/=])
and execs it. Everything before the marker came from the startup files; everything after is
the command's. Nothing runs after the command: the login shell and sh both exec'd away.
SHLVL is kept at 1 or more: bash's `exec` lowers it to 0, and a bash started by sshd with
SHLVL 0 counts as top level and reads ~/.bashrc again (the banner would land in server.log).

The marker line also reports $SHELL. Once the login shell is known to quote like POSIX sh
(bash, zsh, dash, ksh), argv travels as plain quoted words and sh execs it directly: no
base64, no subshell, two processes fewer per command. fish (backslashes inside quotes) and
csh (no newline inside quotes) keep the base64 form.
"""

from __future__ import annotations

import base64
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

_PRELUDE = (
    'echo "$1 $SHELL"; echo "$1" >&2; [ "${SHLVL:-0}" -ge 1 ] 2>/dev/null || SHLVL=1; '
    "export SHLVL; "
)
WRAPPER = _PRELUDE + (
    'c=$(printf %s "$2" | base64 -d) || { echo "firedup: cannot decode the command '
    '(base64 missing on the node?)" >&2; exit 126; }; eval "exec $c"'
)
DIRECT = _PRELUDE + 'shift; exec "$@"'
NO_WRAPPER_EXIT = 125  # what a missing start marker means: the wrapper never ran
POSIX_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash"})


def new_marker() -> str:
    return f"firedup-{secrets.token_hex(8)}"


def framed_command(argv: Sequence[str], marker: str, *, posix_shell: bool = False) -> str:
    """The one line sent to the login shell for argv (plain words once it is known POSIX)."""
    if posix_shell:
        return shlex.join(["exec", "/bin/sh", "-c", DIRECT, "firedup", marker, *argv])
    encoded = base64.b64encode(shlex.join(argv).encode()).decode()
    return shlex.join(["exec", "/bin/sh", "-c", WRAPPER, "firedup", marker, encoded])


def is_posix_shell(shell: str) -> bool:
    return shell.rsplit("/", 1)[-1] in POSIX_SHELLS


@dataclass(frozen=True)
class Unframed:
    data: bytes  # what the command printed
    prelude: bytes  # what the login shell's startup files printed before it
    framed: bool  # the marker was seen: the command really ran
    shell: str = ""  # the login shell, as the marker line reported it (stdout only)


def unframe(raw: bytes, marker: str) -> Unframed:
    """Split raw channel output at this call's marker line (`MARK [$SHELL]`)."""
    at = raw.find(marker.encode())
    end = raw.find(b"\n", at) if at >= 0 else -1
    if end < 0:
        return Unframed(raw, b"", False)
    shell = raw[at + len(marker) : end].decode("utf-8", "replace").strip()
    return Unframed(raw[end + 1 :], raw[:at], True, shell)


class StreamUnframer:
    """unframe() for a stream: holds bytes back only until the marker line has passed."""

    def __init__(self, marker: str) -> None:
        self._marker = marker
        self._head = b""
        self.started = False
        self.prelude = b""

    def feed(self, chunk: bytes) -> bytes:
        if self.started:
            return chunk
        self._head += chunk
        found = unframe(self._head, self._marker)
        if not found.framed:
            return b""
        self.started, self.prelude, self._head = True, found.prelude, b""
        return found.data

    def leftover(self) -> bytes:
        """At the end of a stream that never showed the marker: all of it, for the message."""
        return self._head


def startup_files(shell: str) -> str:
    """Where the login shell of `shell` (its path) reads commands for `ssh node CMD`."""
    name = shell.rsplit("/", 1)[-1]
    if name == "bash":
        return "~/.bashrc (or /etc/bash.bashrc)"
    if name == "zsh":
        return "~/.zshenv (or /etc/zsh/zshenv)"
    if name == "fish":
        return "~/.config/fish/config.fish (or conf.d/*.fish)"
    return f"the startup files of {shell or 'the login shell'}"
