"""One error tree for everything firedup expects to go wrong.

Every expected failure is a `DeployError` subclass carrying an exit code; the task layer prints
its message (one clear line, no traceback) and exits with that code. Anything that is not a
`DeployError` is a bug and keeps its traceback. Exit codes are documented in docs/exit-codes.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class DeployError(Exception):
    """Base of every expected failure."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UsageError(DeployError):
    """A bad command-line argument (missing --host, unknown option value)."""

    exit_code = 2


class InventoryError(DeployError):
    """The inventory file is missing, malformed, or names an unknown host."""

    exit_code = 2


class RenderError(DeployError):
    """A launch template failed to render or the result is not valid bash."""

    exit_code = 2


class ConnectError(DeployError):
    """The node could not be reached, authenticated, or its host key was refused."""

    exit_code = 3


class TransientConnectError(ConnectError):
    """A failure that may pass: refused (sshd restarting), dropped, or timed out. Retried."""


class ConnectionLostError(TransientConnectError):
    """An open connection dropped while a command ran; the command's fate is unknown."""


class CommandTimeoutError(TransientConnectError):
    """A command did not finish within its timeout (the node or the link may be frozen)."""


@dataclass(frozen=True)
class CommandResult:
    """What a remote (or local) command did: a value, like Fabric's Result."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes = b""
    host: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass
class RemoteCommandError(DeployError):
    """A command on the node exited non-zero; carries its result like invoke's UnexpectedExit."""

    result: CommandResult
    what: str = field(default="")
    exit_code = 4

    def __post_init__(self) -> None:
        detail = (self.result.err or self.result.out).strip().splitlines()
        tail = detail[-1] if detail else "no output"
        label = self.what or self.result.argv[0]
        where = f" on {self.result.host}" if self.result.host else ""
        super().__init__(f"{label} failed{where} (exit {self.result.exit_code}): {tail}")

    def __str__(self) -> str:  # dataclass would otherwise replace DeployError.__str__
        return DeployError.__str__(self)


class AnswerTooLargeError(DeployError):
    """A node's answer to one command passed the bound the operator keeps in memory; the
    command was ended (a log that became an endless stream, a file that grew)."""

    exit_code = 4


class PatchError(DeployError):
    """A patch does not apply, does not verify, or its manifest is invalid."""

    exit_code = 5


class PreflightError(DeployError):
    """A preflight check failed: the launch would fail, so it was not attempted."""

    exit_code = 6


class StartError(DeployError):
    """The server could not be started (already running, launch script missing)."""

    exit_code = 7


class SlotTakenError(StartError):
    """The node and workdir run another host entry's deployment: refused without --force."""


class ServerCrashedError(DeployError):
    """The server died, or its log shows a fatal error, while we waited."""

    exit_code = 8

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        reason: str | None = None,
        excerpt: tuple[str, ...] = (),
        log_path: str | None = None,
        running: bool = False,
    ) -> None:
        # The same facts as the message, as values, for `--json` readers.
        super().__init__(message, hint=hint)
        self.reason = reason
        self.excerpt = excerpt
        self.log_path = log_path
        # The failure was read while the server's processes still ran: an engine tearing
        # itself down (vLLM takes seconds), or one that is stuck and needs `fab stop`.
        self.running = running


class NotReadyError(DeployError):
    """The overall deadline passed while the server was still starting."""

    exit_code = 9


class ForeignListenerError(DeployError):
    """Something that is not our server holds the deployment's port."""

    exit_code = 10


class LockedError(DeployError):
    """Another firedup operation holds the node's lock."""

    exit_code = 11


class RouterError(DeployError):
    """The router refused a worker, did not answer, or did not list (or drop) it in time."""

    exit_code = 12


class WaitInterrupted(DeployError):
    """Ctrl-C while waiting: the wait stopped, the server did not."""

    exit_code = 130
