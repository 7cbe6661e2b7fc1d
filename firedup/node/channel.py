"""One command on an open SSH transport: exec, stdout and stderr read together, the exit code.

In place of Fabric's `Connection.run` (invoke's Runner): that runs three threads per command
and polls them every 10 ms, which cost ~10-20 ms a command on loopback, and it answers Ctrl-C
by sending `\\x03` to the remote command instead of letting the interrupt reach the caller.
Here one loop waits on the channel itself (paramiko's pipe, set by either stream and on close).
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from typing import Any

from firedup.errors import AnswerTooLargeError

NO_EXIT_STATUS = -1  # the channel closed without one: the connection went away
# What one command's answer may hold in the operator's memory: far above any answer firedup
# asks for (a log tail is bounded on the node at a few MiB), far below what hurts.
MAX_ANSWER_BYTES = 256 * 1024 * 1024


class ChannelTimeoutError(Exception):
    """The command did not end within its time; the channel is closed."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"command timed out after {timeout_s:g} s")
        self.timeout = timeout_s


@dataclass(frozen=True)
class Exec:
    """What one exec on a channel gave back."""

    exit_code: int  # NO_EXIT_STATUS when the channel closed without one
    stdout: bytes
    stderr: bytes


def run_on_channel(
    transport: Any, line: str, *, timeout_s: float, open_timeout_s: float, stdin: bytes = b""
) -> Exec:
    """Exec `line` on a new session of `transport`, send `stdin` then EOF, and read both
    streams until the command exits. Paramiko's errors pass through; ChannelTimeoutError past
    `timeout_s`; AnswerTooLargeError past MAX_ANSWER_BYTES of output. The channel is closed on
    every way out (an interrupt included), which ends the command on the node."""
    deadline = time.monotonic() + timeout_s
    channel = start_exec(
        transport, line, timeout_s=timeout_s, open_timeout_s=open_timeout_s, stdin=stdin
    )
    try:
        out, err = bytearray(), bytearray()
        while True:
            _drain(channel, out, err)
            if channel.closed or channel.eof_received:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeoutError(timeout_s)
            select.select([channel], [], [], left)
        # EOF: no more output; the exit status follows it (OpenSSH sends EOF, status, close).
        left = deadline - time.monotonic()
        if not channel.closed and not channel.status_event.wait(max(0.0, left)):
            raise ChannelTimeoutError(timeout_s)
        _drain(channel, out, err)
        code = channel.exit_status if channel.exit_status_ready() else NO_EXIT_STATUS
        return Exec(code, bytes(out), bytes(err))
    finally:
        channel.close()


def start_exec(
    transport: Any, line: str, *, timeout_s: float, open_timeout_s: float, stdin: bytes = b""
) -> Any:
    """A new session of `transport` running `line`, `stdin` sent and then EOF; each read and
    write on it waits at most `timeout_s`. Closed again if any of that fails."""
    channel = transport.open_session(timeout=open_timeout_s)
    try:
        channel.settimeout(max(0.001, timeout_s))
        channel.exec_command(line)
        if stdin:
            channel.sendall(stdin)
        channel.shutdown_write()
    except BaseException:
        channel.close()
        raise
    return channel


def _drain(channel: Any, out: bytearray, err: bytearray) -> None:
    while channel.recv_ready():
        out += channel.recv(65536)
        _bounded(out, err)
    while channel.recv_stderr_ready():
        err += channel.recv_stderr(65536)
        _bounded(out, err)


def _bounded(out: bytearray, err: bytearray) -> None:
    if len(out) + len(err) > MAX_ANSWER_BYTES:
        raise AnswerTooLargeError(
            f"the node's answer passed {MAX_ANSWER_BYTES // 2**20} MiB: the command was ended"
        )
