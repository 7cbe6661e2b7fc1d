"""The SSH node: one persistent Fabric connection per host (the local node is firedup.node.local).

Only the SSH modules of firedup.node (ssh, ssh_connect, ssh_config, hostkeys) import fabric or
paramiko. Connection-level failures become `ConnectError` (or `ConnectionLostError` when an
open connection dropped mid-command), so the rest of firedup never sees a paramiko exception.
Every command goes through firedup.node.framing: only what the command printed is returned,
never what the login shell's startup files printed before it.
"""

from __future__ import annotations

import logging
import posixpath
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

import paramiko
from fabric import Config
from paramiko.sftp import (
    CMD_HANDLE,
    CMD_OPEN,
    SFTP_FLAG_CREATE,
    SFTP_FLAG_EXCL,
    SFTP_FLAG_WRITE,
    SFTPError,
)

from firedup.config.inventory import HostSpec
from firedup.errors import (
    CommandResult,
    CommandTimeoutError,
    ConnectError,
    ConnectionLostError,
    RemoteCommandError,
)
from firedup.node.base import require_ok, script_argv
from firedup.node.channel import (
    NO_EXIT_STATUS,
    ChannelTimeoutError,
    Exec,
    run_on_channel,
    start_exec,
)
from firedup.node.framing import (
    NO_WRAPPER_EXIT,
    StreamUnframer,
    Unframed,
    framed_command,
    is_posix_shell,
    new_marker,
    startup_files,
    unframe,
)
from firedup.node.local import LocalNode
from firedup.node.ssh_connect import CHANNEL_TIMEOUT_S, build, close_all, connect_error

# Paramiko logs its own tracebacks for refused connections; we report them ourselves.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)
log = logging.getLogger("firedup")


def _no_space(exc: OSError, df: CommandResult) -> bool:
    """SFTP says only "Failure" for ENOSPC: ask df whether the filesystem is full."""
    if "No space" in str(exc):
        return True
    lines = df.out.strip().splitlines()
    fields = lines[-1].split() if len(lines) > 1 else []
    return len(fields) >= 4 and fields[3].isdigit() and int(fields[3]) < 64


def _create(sftp: paramiko.SFTPClient, path: str, mode: int) -> paramiko.SFTPFile:
    """Create `path` (O_EXCL) with `mode` from its first instant: the mode travels in the OPEN
    request. `SFTPClient.open` sends no mode, so the file is born 0644 and a chmod after it
    comes too late for a reader who opened it in between (issue 16 §1)."""
    attrs = paramiko.SFTPAttributes()
    attrs.st_mode = mode
    flags = SFTP_FLAG_WRITE | SFTP_FLAG_CREATE | SFTP_FLAG_EXCL
    kind, msg = sftp._request(CMD_OPEN, path, flags, attrs)
    if kind != CMD_HANDLE:
        raise paramiko.SFTPError("Expected handle")
    return paramiko.SFTPFile(sftp, msg.get_binary(), "wb")


class SshNode:
    """A node reached over SSH. Lazy: nothing is contacted until the first command."""

    def __init__(self, spec: HostSpec, *, config: Config | None = None) -> None:
        self.spec = spec
        overrides = {"run": {"in_stream": False}, "load_ssh_configs": False}
        cfg = config if config is not None else Config(overrides=overrides)
        self._chain = build(spec, cfg)
        self._conn = self._chain[-1]
        self._sftp_usable = True  # False once the login shell was seen to break SFTP
        self._posix_shell = False  # True once the login shell is seen to quote like sh

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def generation(self) -> int:
        """Changes on every (re)connect: what lived on the old transport (a lock holder) died."""
        return int(self._conn.opens)

    def _connect_error(self, exc: BaseException) -> ConnectError:
        return connect_error(self._chain, exc)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: bool = True,
        what: str = "",
    ) -> CommandResult:
        result, _prelude = self._run_framed(argv, timeout_s)
        return require_ok(result, what) if check else result

    def _run_framed(self, argv: Sequence[str], timeout_s: float) -> tuple[CommandResult, bytes]:
        """Run argv through the framing wrapper; also return what the login shell printed."""
        marker = new_marker()
        done = self._exec(self._line(argv, marker), timeout_s)
        if done.exit_code == NO_EXIT_STATUS:
            self._conn.close()
            raise ConnectionLostError(f"{self.name}: connection lost during {argv[0]}")
        out, err = unframe(done.stdout, marker), unframe(done.stderr, marker)
        return self._result(argv, done.exit_code, out, err), out.prelude

    def _exec(self, line: str, timeout_s: float, stdin: bytes = b"") -> Exec:
        """One command on the connection (opened if it is not): its exit code and output."""
        try:
            with self._connection_errors():
                self._conn.open()
                return run_on_channel(
                    self._conn.client.get_transport(),
                    line,
                    timeout_s=timeout_s,
                    # Opening the channel counts too: a frozen peer must not outlast the bound.
                    open_timeout_s=min(CHANNEL_TIMEOUT_S, max(1.0, timeout_s)),
                    stdin=stdin,
                )
        except ChannelTimeoutError as exc:
            self._conn.close()
            raise CommandTimeoutError(f"{self._conn.hop.where}: {exc}") from exc

    @contextmanager
    def _connection_errors(self) -> Iterator[None]:
        """paramiko's and the socket's failures as firedup's (connect_error); the connection
        they broke is closed, all of it (bastions too) when opening it failed."""
        try:
            yield
        except ConnectError:
            self.close()
            raise
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._conn.close()
            raise self._connect_error(exc) from exc

    def _line(self, argv: Sequence[str], marker: str) -> str:
        return framed_command(argv, marker, posix_shell=self._posix_shell)

    def _result(
        self, argv: Sequence[str], code: int, out: Unframed, err: Unframed
    ) -> CommandResult:
        if not out.framed:
            # The wrapper never ran: the login shell failed or exited before our command.
            note = b"the login shell did not run the command: " + (err.data or out.data)[-300:]
            return CommandResult(tuple(argv), code or NO_WRAPPER_EXIT, b"", note, self.name)
        self._posix_shell = is_posix_shell(out.shell)
        return CommandResult(tuple(argv), code, out.data, err.data, self.name)

    def put(self, data: bytes, path: str, *, mode: int = 0o600) -> None:
        if not self._conn.is_connected:
            self._conn.close()  # drops Fabric's cached SFTP client of a dead transport
        sftp = self._sftp() if self._sftp_usable else None
        if sftp is None:
            self._put_exec(data, path, mode)
            return
        parent = posixpath.dirname(path)
        tmp = posixpath.join(parent, f".{posixpath.basename(path)}.tmp-{secrets.token_hex(4)}")
        try:
            try:
                fh = _create(sftp, tmp, mode)
            except FileNotFoundError:  # a missing parent costs one more round trip, only then
                # Both named levels (runs/, runs/ID) are made 0700; the workdir already is.
                made = [posixpath.dirname(parent), parent]
                self.run(["mkdir", "-p", "-m", "700", "--", *made], what=f"mkdir {parent}")
                fh = _create(sftp, tmp, mode)
            with fh:
                fh.chmod(mode)  # the exact mode, whatever the server's umask took away
                fh.write(data)
            sftp.posix_rename(tmp, path)  # rename(2): atomic on one filesystem
        except (paramiko.SSHException, EOFError) as exc:
            self._conn.close()
            raise self._connect_error(exc) from exc
        except OSError as exc:
            if not self._conn.is_connected:
                self._conn.close()
                raise ConnectionLostError(f"{self.name}: connection lost during upload") from exc
            self.run(["rm", "-f", "--", tmp], check=False)
            if _no_space(exc, self.run(["df", "-Pk", "--", parent], check=False)):
                raise RemoteCommandError(
                    CommandResult(("sftp-put", path), 1, b"", b"no space left", self.name),
                    what=f"upload of {path} (no space left on the node's {parent})",
                ) from exc
            raise RemoteCommandError(
                CommandResult(("sftp-put", path), 1, b"", str(exc).encode(), self.name),
                what=f"upload of {path}",
            ) from exc

    def _sftp(self) -> paramiko.SFTPClient | None:
        """The connection's SFTP client; None once the login shell is seen to break it."""
        try:
            return self._conn.sftp()
        except ConnectError:
            self.close()
            raise
        except (paramiko.SSHException, EOFError, SFTPError) as exc:
            if not self._conn.is_connected:
                self._conn.close()
                raise self._connect_error(exc) from exc
            failure = exc
        # sshd starts the sftp subsystem through the login shell: a startup file that prints
        # corrupts the protocol ("Garbage packet received"). Find out whether that is it.
        shell, prelude = self._run_framed(["printenv", "SHELL"], 30.0)
        if not prelude.strip():
            raise ConnectError(
                f"{self.name}: the node's SFTP subsystem failed: {failure}",
                hint="check the Subsystem sftp line of the node's sshd_config",
            ) from failure
        self._sftp_usable = False
        banner = prelude.decode("utf-8", "replace").strip().splitlines()[0][:80]
        log.warning(
            "%s: the login shell prints %r before every command, which breaks SFTP; "
            "uploading through a command instead. Fix: make %s print only in interactive "
            "shells",
            self.name,
            banner,
            startup_files(shell.out.strip()),
        )
        return None

    def _put_exec(self, data: bytes, path: str, mode: int) -> None:
        """Upload through `put.sh` with the bytes on stdin: needs no clean shell, only sh."""
        argv = script_argv("put", path, format(mode, "o"))
        marker = new_marker()
        done = self._exec(self._line(argv, marker), max(60.0, len(data) / 1e6), stdin=data)
        out, err = unframe(done.stdout, marker), unframe(done.stderr, marker)
        require_ok(self._result(argv, done.exit_code, out, err), f"upload of {path}")

    def get(self, path: str) -> bytes:
        return self.run(["cat", "--", path], what=f"read {path}").stdout

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        marker = new_marker()
        with self._connection_errors():
            self._conn.open()
            transport = self._conn.client.get_transport()
            channel = start_exec(
                transport,
                self._line(argv, marker),
                timeout_s=timeout_s,
                open_timeout_s=CHANNEL_TIMEOUT_S,
            )
        unframer = StreamUnframer(marker)
        try:
            while True:
                try:
                    chunk = channel.recv(65536)
                except TimeoutError:
                    if not transport.is_active():
                        self._conn.close()
                        raise ConnectionLostError(
                            f"{self.name}: connection lost while streaming"
                        ) from None
                    yield b""
                    continue
                except (paramiko.SSHException, OSError, EOFError) as exc:
                    self._conn.close()
                    raise self._connect_error(exc) from exc
                if not chunk:
                    if not transport.is_active():
                        self._conn.close()
                        raise ConnectionLostError(f"{self.name}: connection lost while streaming")
                    return
                yield unframer.feed(chunk)
        finally:
            with suppress(paramiko.SSHException, OSError, EOFError):
                channel.close()  # the link may be gone already: nothing left to close

    def close(self) -> None:
        close_all(self._chain)


def open_node(spec: HostSpec, *, config: Config | None = None) -> SshNode | LocalNode:
    """The node for an inventory host. Lazy: nothing is contacted yet."""
    if spec.transport == "local":
        return LocalNode(spec.name)
    return SshNode(spec, config=config)
