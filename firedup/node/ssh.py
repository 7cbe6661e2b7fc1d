"""The SSH node: one persistent Fabric connection per host (the local node is firedup.node.local).

This is the only module that imports fabric or paramiko. Connection-level failures become
`ConnectError` (or `ConnectionLostError` when an open connection dropped mid-command), so the
rest of firedup never sees a paramiko exception.
"""

from __future__ import annotations

import io
import logging
import posixpath
import secrets
import shlex
import socket
from collections.abc import Iterator, Sequence
from contextlib import suppress
from typing import Any

import paramiko
from fabric import Config, Connection
from invoke.exceptions import CommandTimedOut

from firedup.config.inventory import HostSpec, KeyPolicy
from firedup.errors import (
    CommandResult,
    CommandTimeoutError,
    ConnectError,
    ConnectionLostError,
    RemoteCommandError,
    TransientConnectError,
)
from firedup.node.base import require_ok
from firedup.node.gate import CONNECTING
from firedup.node.local import LocalNode

# Paramiko logs its own tracebacks for refused connections; we report them ourselves.
logging.getLogger("paramiko").setLevel(logging.CRITICAL)

KEEPALIVE_S = 30
CHANNEL_TIMEOUT_S = 15.0
IDLE_WAKE_S = 2.0


def _no_space(exc: OSError, df: CommandResult) -> bool:
    """SFTP says only "Failure" for ENOSPC: ask df whether the filesystem is full."""
    if "No space" in str(exc):
        return True
    lines = df.out.strip().splitlines()
    fields = lines[-1].split() if len(lines) > 1 else []
    return len(fields) >= 4 and fields[3].isdigit() and int(fields[3]) < 64


class _KeepaliveConnection(Connection):
    """A Connection that re-applies keepalive on every (re)open: a reconnect is a new transport."""

    opens = 0  # how many transports this connection has had: a reconnect is a new one

    def open(self) -> Any:
        if self.is_connected:
            return None  # Fabric's own short-circuit: nothing new was opened
        with CONNECTING.slot():  # a fleet connects a few hosts at a time (firedup.node.gate)
            result = super().open()
        self.opens += 1
        transport = self.client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)
            # paramiko's transport thread wakes every 0.1 s on an idle link (its socket
            # timeout) only to find nothing to do: 1.2 ms of CPU a second per connection,
            # which a fleet pays N times over a wait that lasts longer with N (64 idle
            # connections: 7.9% of a core; at 2 s, 1.5%). Reads still return as data comes;
            # closing does not wait on it (bench/results/report.md, "Fleet scaling").
            transport.sock.settimeout(IDLE_WAKE_S)
        return result


class SshNode:
    """A node reached over SSH. Lazy: nothing is contacted until the first command."""

    def __init__(self, spec: HostSpec, *, config: Config | None = None) -> None:
        self.spec = spec
        overrides = {"run": {"in_stream": False}, "load_ssh_configs": True}
        cfg = config if config is not None else Config(overrides=overrides)
        cfg.run.in_stream = False
        connect_kwargs: dict[str, Any] = {
            **dict(cfg.connect_kwargs),
            "channel_timeout": CHANNEL_TIMEOUT_S,
            "allow_agent": spec.identity_file is None,
            "look_for_keys": spec.identity_file is None,
        }
        if spec.identity_file is not None:
            connect_kwargs["key_filename"] = [str(spec.identity_file)]
        self._conn = _KeepaliveConnection(
            spec.address,
            user=spec.user,
            port=spec.port,
            config=cfg,
            connect_timeout=spec.connect_timeout_s,
            connect_kwargs=connect_kwargs,
        )
        self._apply_host_key_policy()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def generation(self) -> int:
        """Changes on every (re)connect: what lived on the old transport (a lock holder) died."""
        return int(self._conn.opens)

    def _apply_host_key_policy(self) -> None:
        known_hosts = self.spec.known_hosts
        client = self._conn.client
        if self.spec.host_key_policy is KeyPolicy.ACCEPT_NEW:
            # Trust on first use: new keys are written to the file, changed keys are refused.
            known_hosts.parent.mkdir(parents=True, exist_ok=True)
            if not known_hosts.exists():
                known_hosts.touch(mode=0o600)
            client.load_host_keys(str(known_hosts))
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            if known_hosts.exists():
                client.load_host_keys(str(known_hosts))
            client.set_missing_host_key_policy(paramiko.RejectPolicy())

    def _connect_error(self, exc: BaseException) -> ConnectError:
        where = f"{self.name} ({self.spec.address}:{self.spec.port})"
        if isinstance(exc, paramiko.BadHostKeyException):
            return ConnectError(
                f"{where}: host key CHANGED (got {exc.key.get_name()} "
                f"{exc.key.get_base64()[:16]}..., expected {exc.expected_key.get_base64()[:16]}"
                f"...); refusing to connect",
                hint=f"if the node was reinstalled, remove its entry from {self.spec.known_hosts}",
            )
        if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
            return ConnectError(
                f"{where}: host key unknown (not in {self.spec.known_hosts}); refusing to connect",
                hint="add it with ssh-keyscan after checking it, or set "
                "'host_key_policy: accept-new' for this host in the inventory",
            )
        dropped = "transport shut down or saw eof" in str(exc).lower()
        if isinstance(exc, paramiko.AuthenticationException) and dropped:
            return TransientConnectError(f"{where}: connection dropped during authentication")
        if isinstance(exc, paramiko.AuthenticationException):
            return ConnectError(
                f"{where}: authentication failed as {self.spec.user or 'default user'}",
                hint="check 'user' and 'identity_file' in the inventory",
            )
        if isinstance(exc, socket.gaierror):
            return ConnectError(f"{where}: cannot resolve address: {exc}")
        if isinstance(exc, CommandTimedOut):
            return CommandTimeoutError(f"{where}: command timed out after {exc.timeout} s")
        if isinstance(exc, EOFError | ConnectionError) or (
            isinstance(exc, paramiko.SSHException) and self._conn.is_connected
        ):
            return ConnectionLostError(f"{where}: connection lost: {exc or type(exc).__name__}")
        if isinstance(exc, OSError | paramiko.SSHException):
            # Refused (sshd restarting), unreachable, banner or channel timeouts: may pass.
            return TransientConnectError(f"{where}: cannot connect: {exc or type(exc).__name__}")
        return ConnectError(f"{where}: cannot connect: {exc or type(exc).__name__}")

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: bool = True,
        what: str = "",
    ) -> CommandResult:
        command = shlex.join(argv)
        transport = self._conn.client.get_transport() if self._conn.is_connected else None
        if transport is not None:
            # Opening the channel counts too: a frozen peer must not outlast the caller's bound.
            transport.channel_timeout = min(CHANNEL_TIMEOUT_S, max(1.0, timeout_s))
        try:
            r = self._conn.run(
                command,
                hide=True,
                warn=True,
                pty=False,
                in_stream=io.StringIO(""),  # remote stdin sees EOF at once
                timeout=timeout_s,
                encoding="latin-1",  # a bijection: the exact bytes come back
            )
        except (paramiko.SSHException, OSError, EOFError, CommandTimedOut) as exc:
            self._conn.close()
            raise self._connect_error(exc) from exc
        if r.exited == -1:
            self._conn.close()
            raise ConnectionLostError(f"{self.name}: connection lost during {argv[0]}")
        result = CommandResult(
            argv=tuple(argv),
            exit_code=r.exited,
            stdout=r.stdout.encode("latin-1"),
            stderr=r.stderr.encode("latin-1"),
            host=self.name,
        )
        return require_ok(result, what) if check else result

    def put(self, data: bytes, path: str, *, mode: int = 0o644) -> None:
        if not self._conn.is_connected:
            self._conn.close()  # drops Fabric's cached SFTP client of a dead transport
        parent = posixpath.dirname(path)
        tmp = posixpath.join(parent, f".{posixpath.basename(path)}.tmp-{secrets.token_hex(4)}")
        try:
            sftp = self._conn.sftp()
            try:
                fh = sftp.open(tmp, "wb")
            except FileNotFoundError:  # a missing parent costs one more round trip, only then
                self.run(["mkdir", "-p", "--", parent], what=f"mkdir {parent}")
                fh = sftp.open(tmp, "wb")
            with fh:
                fh.chmod(mode)  # before any byte: a 0600 secret is never readable by others
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

    def get(self, path: str) -> bytes:
        return self.run(["cat", "--", path], what=f"read {path}").stdout

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        try:
            self._conn.open()
            transport = self._conn.client.get_transport()
            channel = transport.open_session(timeout=CHANNEL_TIMEOUT_S)
            channel.settimeout(timeout_s)
            channel.exec_command(shlex.join(argv))
            channel.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._conn.close()
            raise self._connect_error(exc) from exc
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
                yield chunk
        finally:
            with suppress(paramiko.SSHException, OSError, EOFError):
                channel.close()  # the link may be gone already: nothing left to close

    def close(self) -> None:
        self._conn.close()


def open_node(spec: HostSpec, *, config: Config | None = None) -> SshNode | LocalNode:
    """The node for an inventory host. Lazy: nothing is contacted yet."""
    if spec.transport == "local":
        return LocalNode(spec.name)
    return SshNode(spec, config=config)
