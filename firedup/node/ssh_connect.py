"""Opening SSH to a host: the route from ssh_config, each hop checked, auth like OpenSSH.

Fabric is handed fully resolved values and an empty ssh_config (firedup.node.ssh_config did
the resolving), so it builds no connection of its own: in particular not its ProxyJump
gateway, which would accept any bastion key (AutoAddPolicy). Each bastion is a connection made
here with the host's own key policy and known_hosts. Authentication tries, like OpenSSH, the
configured identities and the agent's keys (an `identity_file` does not turn the agent off).
Failures become ConnectError subclasses naming the hop, the key and what to do.
"""

from __future__ import annotations

import base64
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko
from fabric import Config, Connection
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from firedup.config.inventory import HostSpec
from firedup.errors import (
    ConnectError,
    ConnectionLostError,
    TransientConnectError,
)
from firedup.node.gate import CONNECTING
from firedup.node.hostkeys import Policy, prepare
from firedup.node.ssh_config import Endpoint, Route, resolve

KEEPALIVE_S = 30
CHANNEL_TIMEOUT_S = 15.0
IDLE_WAKE_S = 2.0


def _dropped_before_banner(exc: BaseException) -> bool:
    """What a full sshd does (MaxStartups: a bastion's default drops 30% of new connections
    past 10 pending): it closes the connection before its banner. The sshd counts a
    connection as pending for a moment after its client authenticated, so even a fleet that
    connects fewer hosts at once than the limit meets it now and then."""
    if isinstance(exc, paramiko.SSHException) and "protocol banner" in str(exc):
        return True
    return isinstance(exc, ConnectionResetError | ConnectionAbortedError)


# Three more tries within the host's handshake slot, 0.1-1 s apart (jittered: a fleet that
# was dropped together does not come back together).
DROPPED_EARLY: dict[str, Any] = {
    "retry": retry_if_exception(_dropped_before_banner),
    "stop": stop_after_attempt(4),
    "wait": wait_random_exponential(multiplier=0.1, max=1.0),
    "reraise": True,
}


class KeepaliveConnection(Connection):
    """A Connection that re-reads host keys before and re-applies keepalive after every
    (re)open: a reconnect is a new transport, and known_hosts may have gained a line."""

    opens = 0  # how many transports this connection has had: a reconnect is a new one
    hop: Hop

    def open(self) -> Any:
        if self.is_connected:
            return None  # Fabric's own short-circuit: nothing new was opened
        prepare(self.client, self.hop.policy)
        self.hop.check_identities()
        if self.hop.endpoint.identities_only:
            # IdentitiesOnly: of the agent's keys, only those of the configured identities
            # (an agent full of keys would otherwise hit sshd's MaxAuthTries first).
            self.connect_kwargs["allow_agent"] = False
            key = self.hop.agent_key()
            if key is not None:
                self.connect_kwargs["pkey"] = key
        with CONNECTING.slot():  # a fleet connects a few hosts at a time (firedup.node.gate)
            for attempt in Retrying(**DROPPED_EARLY):
                with attempt:
                    result = self._open_direct() if self.gateway is None else super().open()
        self.opens += 1
        transport = self.client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)
            # paramiko's transport thread wakes every 0.1 s on an idle link (its socket
            # timeout) only to find nothing to do: 1.2 ms of CPU a second per connection,
            # which a fleet pays N times over a wait that lasts longer with N (64 idle
            # connections: 7.9% of a core; at 2 s, 1.5%). Reads still return as data comes,
            # and closing does not wait on it.
            transport.sock.settimeout(IDLE_WAKE_S)
            _send_at_once(transport.sock)
        return result

    def _open_direct(self) -> Any:
        """Fabric's open on a socket of our own, TCP_NODELAY before the handshake: its small
        packets back to back (NEWKEYS, then the service request) otherwise wait out the
        peer's delayed ACK, 60-100 ms of a loopback connect that takes 18 ms without."""
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        try:
            _send_at_once(sock)
            self.connect_kwargs["sock"] = sock
            return super().open()
        except BaseException:
            sock.close()
            raise
        finally:
            self.connect_kwargs.pop("sock", None)  # a reconnect dials afresh


def _send_at_once(sock: object) -> None:
    """TCP_NODELAY, as OpenSSH sets it: a command is a few small packets in a row (channel
    open, exec, EOF), and Nagle holds each behind an ACK the peer delays by up to 40 ms (every
    command cost ~45 ms on loopback, 3 ms without). Behind a bastion the socket is a channel
    of the bastion's connection, whose own socket got this when it opened."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@dataclass
class Hop:
    """One hop of a route and how to describe it in a message."""

    endpoint: Endpoint
    where: str
    policy: Policy
    required_key: Path | None  # the inventory's identity_file: must exist

    agent: paramiko.Agent | None = None  # kept open: its keys sign through it

    def agent_key(self) -> paramiko.AgentKey | None:
        """The agent's copy of a configured identity (matched by its .pub file), if any."""
        blobs = set()
        for path in self.endpoint.identity_files:
            try:
                blobs.add(base64.b64decode(Path(f"{path}.pub").read_text().split()[1]))
            except (OSError, IndexError, ValueError):
                continue
        if not blobs:
            return None
        if self.agent is not None:
            self.agent.close()
        self.agent = paramiko.Agent()
        return next((k for k in self.agent.get_keys() if k.asbytes() in blobs), None)

    def check_identities(self) -> None:
        key = self.required_key
        if key is not None and not key.is_file():
            raise ConnectError(
                f"{self.where}: identity_file {key} does not exist",
                hint="fix 'identity_file' in the inventory, or drop it to use ssh_config "
                "and the agent",
            )


def _connect_kwargs(cfg: Config, endpoint: Endpoint) -> dict[str, Any]:
    keys = [str(p) for p in endpoint.identity_files if p.is_file()]
    kwargs: dict[str, Any] = {
        **dict(cfg.connect_kwargs),
        "channel_timeout": CHANNEL_TIMEOUT_S,
        "allow_agent": True,  # OpenSSH offers the agent's keys as well as IdentityFile's
        # OpenSSH tries ~/.ssh/id_* only when no IdentityFile is configured.
        "look_for_keys": not endpoint.identity_files and not endpoint.identities_only,
    }
    if keys:
        kwargs["key_filename"] = [*kwargs.get("key_filename", []), *keys]
    return kwargs


def _gateway(chain: list[KeepaliveConnection], endpoint: Endpoint) -> Any:
    """The previous hop (ProxyJump), else the endpoint's ProxyCommand, else none at all."""
    if chain:
        return chain[-1]
    return endpoint.proxy_command or False


def _fab_ssh_config(cfg: Config) -> str | None:
    path = getattr(cfg, "_runtime_ssh_path", None) or cfg.get("ssh_config_path")
    return str(path) if path else None


def build(spec: HostSpec, cfg: Config) -> list[KeepaliveConnection]:
    """The connections of the route to `spec`, first bastion first, the node last."""
    route: Route = resolve(spec, _fab_ssh_config(cfg))
    plain = cfg.clone()
    plain.base_ssh_config = paramiko.SSHConfig()  # resolved already: Fabric must not redo it
    plain.run.in_stream = False
    chain: list[KeepaliveConnection] = []
    for endpoint in (*route.jumps, route.target):
        is_target = endpoint is route.target
        where = (
            f"{spec.name} ({endpoint.where()})"
            if is_target
            else f"{spec.name} via bastion {endpoint.alias} ({endpoint.where()})"
        )
        policy = Policy(
            where,
            endpoint.host,
            endpoint.port,
            spec.known_hosts,
            spec.host_key_policy,
            hashed=endpoint.hash_known_hosts,
        )
        conn = KeepaliveConnection(
            endpoint.host,
            user=endpoint.user,
            port=endpoint.port,
            config=plain,
            gateway=_gateway(chain, endpoint),
            connect_timeout=endpoint.connect_timeout_s or spec.connect_timeout_s,
            connect_kwargs=_connect_kwargs(cfg, endpoint),
        )
        required = spec.identity_file if is_target else None
        # Connection is an invoke DataProxy: a plain attribute set would land in the shared
        # config (and every hop would see the last hop's policy).
        object.__setattr__(conn, "hop", Hop(endpoint, where, policy, required))
        chain.append(conn)
    return chain


def failed_hop(chain: list[KeepaliveConnection]) -> KeepaliveConnection:
    """The hop that was being opened: the first one without a live transport."""
    return next((c for c in chain if not c.is_connected), chain[-1])


def _auth_error(hop: Hop, exc: paramiko.AuthenticationException) -> ConnectError:
    endpoint = hop.endpoint
    keys = ", ".join(str(p) for p in endpoint.identity_files) or "the default keys"
    if isinstance(exc, paramiko.PasswordRequiredException):
        return ConnectError(
            f"{hop.where}: the key {keys} is passphrase-protected and no ssh-agent key was "
            "accepted; firedup never asks for passphrases",
            hint=f'load it into your agent: eval "$(ssh-agent)"; ssh-add {keys}',
        )
    return ConnectError(
        f"{hop.where}: authentication failed as {endpoint.user or 'the local user'} "
        f"(tried {keys} and the ssh-agent's keys)",
        hint="check 'user' and 'identity_file' in the inventory or User/IdentityFile in "
        "ssh_config, and that the public key is in the node's authorized_keys",
    )


def connect_error(chain: list[KeepaliveConnection], exc: BaseException) -> ConnectError:
    """A paramiko/socket failure as the firedup error that says what happened where."""
    conn = failed_hop(chain)
    hop, target = conn.hop, chain[-1]
    where = hop.where
    if isinstance(exc, ConnectError):
        return exc
    if isinstance(exc, paramiko.BadHostKeyException):
        return hop.policy.refusal(exc.key, hop.policy.judge(exc.key))
    dropped = "transport shut down or saw eof" in str(exc).lower()
    if isinstance(exc, paramiko.AuthenticationException) and dropped:
        return TransientConnectError(f"{where}: connection dropped during authentication")
    if isinstance(exc, paramiko.SSHException) and "no existing session" in str(exc).lower():
        # paramiko's next key found the link closed: a drop, or sshd's MaxAuthTries reached.
        return TransientConnectError(
            f"{where}: the node closed the connection during authentication (a dropped link, "
            "or more keys offered than sshd's MaxAuthTries allows, 6 by default)",
            hint="with many keys in your ssh-agent, set `IdentitiesOnly yes` and the "
            "IdentityFile for this host in ~/.ssh/config",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return _auth_error(hop, exc)
    if isinstance(exc, paramiko.ChannelException):  # connected, but no session for a command
        return TransientConnectError(
            f"{where}: the node refused a session for the command ({exc.text}): sshd's "
            "MaxSessions reached, or sessions not allowed for this user",
            hint="check MaxSessions (and Match blocks) in the node's sshd_config",
        )
    if isinstance(exc, socket.gaierror):
        return ConnectError(f"{where}: cannot resolve address: {exc}")
    if isinstance(exc, EOFError | ConnectionError) or (
        isinstance(exc, paramiko.SSHException) and target.is_connected
    ):
        return ConnectionLostError(f"{where}: connection lost: {exc or type(exc).__name__}")
    if isinstance(exc, OSError | paramiko.SSHException):
        # Refused (sshd restarting), unreachable, banner or channel timeouts: may pass.
        return TransientConnectError(f"{where}: cannot connect: {exc or type(exc).__name__}")
    return ConnectError(f"{where}: cannot connect: {exc or type(exc).__name__}")


def close_all(chain: list[KeepaliveConnection]) -> None:
    """The node first, then each bastion (Fabric's close leaves gateways open)."""
    for conn in reversed(chain):
        conn.close()
