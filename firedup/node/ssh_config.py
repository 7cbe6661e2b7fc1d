"""Where an inventory host really is: ssh_config resolved like OpenSSH, then the inventory.

An inventory value wins only when it is written in the inventory; otherwise the host's
ssh_config block gives it (HostName, Port, User, IdentityFile, IdentitiesOnly, ProxyJump,
ConnectTimeout; ProxyCommand when there is no ProxyJump), otherwise the defaults. paramiko's
SSHConfig does the matching (Host, Match, first value wins); it ignores `Include`, so
includes are spliced in here first, each followed by its enclosing Host/Match line again (an
included file's own Host lines end where it ends, as in OpenSSH). Files read: the host's
`ssh_config:` (or `fab -S FILE`) alone, like `ssh -F`; else ~/.ssh/config then
/etc/ssh/ssh_config.
"""

from __future__ import annotations

import glob
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import paramiko

from firedup.config.inventory import HostSpec
from firedup.errors import InventoryError

SYSTEM_CONFIG = Path("/etc/ssh/ssh_config")
MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
_INCLUDE = re.compile(r"^\s*include\s*(?:=\s*|\s)(.+)$", re.IGNORECASE)
_BLOCK = re.compile(r"^\s*(host|match)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Endpoint:
    """One SSH hop, fully resolved."""

    alias: str  # the name as written (inventory address or ProxyJump hop)
    host: str  # what we connect to (HostName)
    port: int
    user: str | None
    identity_files: tuple[Path, ...]
    identities_only: bool
    connect_timeout_s: float | None
    proxy_command: str | None = None  # ssh_config ProxyCommand, tokens expanded
    hash_known_hosts: bool = False  # new known_hosts lines get hashed names

    def where(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Route:
    """The target and the bastions before it, first hop first."""

    target: Endpoint
    jumps: tuple[Endpoint, ...] = ()


def _splice(path: Path, base: Path, depth: int) -> list[str]:
    """The file's lines with every Include replaced by the included files' lines."""
    if depth > MAX_INCLUDE_DEPTH:
        raise InventoryError(f"{path}: Include nested more than {MAX_INCLUDE_DEPTH} deep")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InventoryError(f"cannot read ssh_config {path}: {exc.strerror or exc}") from None
    out: list[str] = []
    block = ""
    for line in lines:
        found = _INCLUDE.match(line)
        if found is None:
            if _BLOCK.match(line):
                block = line
            out.append(line)
            continue
        for word in found.group(1).split():
            pattern = os.path.expanduser(word)
            pattern = pattern if os.path.isabs(pattern) else str(base / pattern)
            for name in sorted(glob.glob(pattern)):
                out.extend(_splice(Path(name), base, depth + 1))
        out.append(block or "Host *")  # back in the including file's block
    return out


def config_files(explicit: Path | None) -> list[tuple[Path, Path]]:
    """(file, base for relative Includes), in the order OpenSSH reads them."""
    if explicit is not None:
        return [(explicit, Path("~/.ssh").expanduser())]
    user = Path("~/.ssh/config").expanduser()
    return [(p, b) for p, b in ((user, user.parent), (SYSTEM_CONFIG, SYSTEM_CONFIG.parent))]


def load_config(explicit: Path | None) -> paramiko.SSHConfig:
    lines: list[str] = []
    for path, base in config_files(explicit):
        if explicit is None and not path.is_file():
            continue
        lines.extend(_splice(path, base, 0))
        lines.append("Host *")  # a file's last block ends with the file
    config = paramiko.SSHConfig()
    config.parse(io.StringIO("\n".join(lines) + "\n"))
    return config


def _yes(value: object) -> bool:
    return str(value).lower() == "yes"


def endpoint(config: paramiko.SSHConfig, alias: str, port: int | None = None) -> Endpoint:
    """ssh_config's view of one name; an explicit `port` (from `host:port`) wins."""
    found = config.lookup(alias)
    timeout = found.get("connecttimeout")
    return Endpoint(
        alias=alias,
        host=str(found.get("hostname", alias)),
        port=port or int(found.get("port", 22)),
        user=found.get("user"),
        identity_files=tuple(Path(p).expanduser() for p in found.get("identityfile", [])),
        identities_only=_yes(found.get("identitiesonly", "no")),
        connect_timeout_s=float(timeout) if timeout else None,
        proxy_command=_proxy_command(found.get("proxycommand")),
        hash_known_hosts=_yes(found.get("hashknownhosts", "no")),
    )


def _proxy_command(value: str | None) -> str | None:
    return None if not value or value.lower() == "none" else value


def parse_jump(hop: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (host may be `[v6]`) -> (user, host, port)."""
    user, _, rest = hop.rpartition("@")
    bracketed = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", rest)
    if bracketed:
        host, port = bracketed.group(1), bracketed.group(2)
    else:
        host, _, port = rest.partition(":")
    return user or None, host, int(port) if port else None


def _jumps(config: paramiko.SSHConfig, value: str | None) -> tuple[Endpoint, ...]:
    if not value or value.lower() == "none":
        return ()
    hops = []
    for hop in value.split(","):
        user, host, port = parse_jump(hop.strip())
        found = endpoint(config, host, port)
        hops.append(Endpoint(**{**found.__dict__, "user": user or found.user}))
    return tuple(hops)


def resolve(spec: HostSpec, fab_ssh_config: str | None = None) -> Route:
    """The host's route: inventory keys that are written win over ssh_config's."""
    explicit = spec.ssh_config or (Path(fab_ssh_config) if fab_ssh_config else None)
    config = load_config(explicit)
    assert spec.address is not None
    found = endpoint(config, spec.address)
    written = spec.model_fields_set
    target = Endpoint(
        alias=spec.address,
        host=found.host,
        port=spec.port if "port" in written else found.port,
        user=spec.user if "user" in written else found.user,
        identity_files=(
            (spec.identity_file,) if spec.identity_file is not None else found.identity_files
        ),
        identities_only=found.identities_only,
        connect_timeout_s=(
            spec.connect_timeout_s
            if "connect_timeout_s" in written or found.connect_timeout_s is None
            else found.connect_timeout_s
        ),
        proxy_command=found.proxy_command,
        hash_known_hosts=found.hash_known_hosts,
    )
    jump = (
        spec.proxy_jump if "proxy_jump" in written else config.lookup(spec.address).get("proxyjump")
    )
    return Route(target=target, jumps=_jumps(config, jump))
