"""The inventory: hosts, groups and deployments, validated once at load.

Schema reference: docs/inventory.md. Every error names the file, the key path and what was
expected, and raises InventoryError (exit 2) before any node is contacted.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from firedup.config.container import ContainerOptions, RuntimeName, check_image, effective_runtime
from firedup.config.deployment import ArgValue, Deployment, Engine, FrozenModel, env_map
from firedup.config.discover import find_inventory, trust_named
from firedup.config.keep import Notify, check_watchable
from firedup.config.slots import SLOTS_DIR, check_gpus_key, slot_root, slot_workdir
from firedup.errors import InventoryError

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"

Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
__all__ = [
    "ArgValue",
    "Deployment",
    "Engine",
    "HostSpec",
    "Inventory",
    "KeyPolicy",
]


class KeyPolicy(StrEnum):
    STRICT = "strict"
    ACCEPT_NEW = "accept-new"


class HostSpec(FrozenModel):
    """Where to run: how to reach a node and where firedup keeps its files there."""

    name: str = ""
    transport: Literal["ssh", "local"] = "ssh"
    address: str | None = None
    user: str | None = None
    port: Port = 22
    identity_file: Path | None = None
    known_hosts: Path = Field(default=Path("~/.ssh/known_hosts"), validate_default=True)
    ssh_config: Path | None = None  # read alone, like `ssh -F`; default ~/.ssh/config
    proxy_jump: str | None = None  # `[user@]bastion[:port][,...]`; default ssh_config's
    host_key_policy: KeyPolicy = KeyPolicy.STRICT
    connect_timeout_s: float = Field(default=10.0, gt=0)
    python: str = "python3"
    workdir: str = Field(min_length=1)  # the slot's directory (see `slot`)
    slot: str | None = Field(default=None, pattern=NAME_RE)  # several deployments per node
    env: dict[str, str] = Field(default_factory=dict)
    # What the engine runs on: `auto` tells a CPU node (no nvidia-smi, a CPU build of the
    # engine) from a GPU node by itself; `cpu` or `gpu` says so outright.
    accelerator: Literal["auto", "gpu", "cpu"] = "auto"
    deployment: str
    keep_runs: int = Field(default=10, ge=1)
    node_address: str | None = None  # how the other nodes of a multi-node deployment reach it
    source: Path | None = None  # the inventory file it came from (set at load, like name)
    runtime: RuntimeName | None = None  # python (default), podman, docker: docs/containers.md
    image: str | None = None
    container: ContainerOptions = Field(default_factory=ContainerOptions)
    notify: Notify | None = None  # the default for its deployment's (docs/operations.md)

    @field_validator("env", mode="before")
    @classmethod
    def _check_env(cls, value: Any) -> Any:
        return env_map(value) if isinstance(value, Mapping) else value

    @model_validator(mode="before")
    @classmethod
    def _slot_workdir(cls, data: Any) -> Any:
        """With `slot:`, the entry's state lives in `<workdir>/slots/<slot>` (firedup.config.
        slots); every use of `workdir` is then the slot's own."""
        if not isinstance(data, dict) or not isinstance(data.get("slot"), str):
            return data
        workdir, slot = data.get("workdir"), data["slot"]
        if not isinstance(workdir, str) or not workdir.startswith("/"):
            return data  # the workdir validator says what is wrong
        root = posixpath.normpath(workdir)
        if posixpath.basename(posixpath.dirname(root)) == SLOTS_DIR and root.endswith(slot):
            return data  # already the slot's directory (a model re-validated)
        return {**data, "workdir": slot_workdir(root, slot)}

    @property
    def slot_root(self) -> str:
        """The inventory's `workdir`: where every slot of this node's workdir lives."""
        return slot_root(self.workdir, self.slot)

    @field_validator("identity_file", "known_hosts", "ssh_config")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("workdir")
    @classmethod
    def _absolute_workdir(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"must be an absolute path on the node, got {value!r}")
        return posixpath.normpath(value)

    @model_validator(mode="after")
    def _address_for_ssh(self) -> HostSpec:
        if self.transport == "ssh" and not self.address:
            raise ValueError("an ssh host needs 'address' (an IP, a name or an ssh_config alias)")
        return self


class Inventory(FrozenModel):
    path: Path = Path("-")
    hosts: dict[str, HostSpec]
    deployments: dict[str, Deployment]
    groups: dict[str, list[str]] = Field(default_factory=dict)
    notify: Notify | None = None  # the default of every host without its own

    @model_validator(mode="before")
    @classmethod
    def _notify_default(cls, data: Any) -> Any:
        """The inventory's `notify` is each host's that has none."""
        if not isinstance(data, Mapping) or not data.get("notify"):
            return data
        hosts = data.get("hosts")
        if not isinstance(hosts, Mapping):
            return data
        given = {
            n: {"notify": data["notify"], **h} if isinstance(h, Mapping) else h
            for n, h in hosts.items()
        }
        return {**data, "hosts": given}

    @model_validator(mode="after")
    def _cross_references(self) -> Inventory:
        for name in [*self.hosts, *self.deployments, *self.groups]:
            if not re.fullmatch(NAME_RE, name):
                raise ValueError(f"{name!r} is not a valid name (letters, digits, '.', '_', '-')")
        for host in self.hosts.values():
            if host.deployment not in self.deployments:
                raise ValueError(
                    f"hosts.{host.name}.deployment: unknown deployment {host.deployment!r}; "
                    f"known: {', '.join(sorted(self.deployments)) or 'none'}"
                )
            dep = self.deployments[host.deployment]
            runtime = effective_runtime(host.runtime, dep.runtime)
            check_image(f"hosts.{host.name}", runtime, dep.image or host.image)
            check_watchable(f"hosts.{host.name}", runtime, dep.watched)
            try:  # a host's env may pin GPUs too: it must agree with the deployment's `gpus`
                check_gpus_key(dep.gpus, -(-dep.tp // dep.nnodes), {**host.env, **dep.env})
            except ValueError as exc:
                raise ValueError(f"hosts.{host.name} with deployment {dep.name}: {exc}") from None
        for deployment in self.deployments.values():
            _check_nodes(deployment, self.hosts)
        for group, members in self.groups.items():
            if group in self.hosts:
                raise ValueError(f"groups.{group}: a group cannot share a name with a host")
            unknown = [m for m in members if m not in self.hosts]
            if unknown:
                raise ValueError(f"groups.{group}: unknown hosts {', '.join(unknown)}")
        return self

    def host(self, name: str) -> HostSpec:
        if name not in self.hosts:
            raise InventoryError(
                f"unknown host {name!r} in {self.path}; known hosts: "
                f"{', '.join(sorted(self.hosts))}"
            )
        return self.hosts[name]

    def deployment_for(self, host: HostSpec) -> Deployment:
        return self.deployments[host.deployment]

    def placement(self, host: HostSpec) -> Placement | None:
        """Rank, node count and rendezvous address of a host in a multi-node deployment."""
        deployment = self.deployment_for(host)
        if not deployment.nodes:
            return None
        first = self.hosts[deployment.nodes[0]]
        address = first.node_address or first.address or "127.0.0.1"
        return Placement(
            rank=deployment.nodes.index(host.name),
            nnodes=deployment.nnodes,
            dist_init_addr=f"{address}:{deployment.dist_init_port}",
        )

    def select(self, selector: str | None) -> list[HostSpec]:
        """Hosts named by a host, a group, or a comma list of either; all hosts when None."""
        if not selector:
            return list(self.hosts.values())
        chosen: dict[str, HostSpec] = {}
        for part in (p.strip() for p in selector.split(",")):
            if not part:
                raise InventoryError(f"empty name in host list {selector!r}")
            names = self.groups.get(part, [part])
            for name in names:
                chosen[name] = self.host(name)
        return list(chosen.values())


@dataclass(frozen=True)
class Placement:
    """A host's place in a multi-node deployment."""

    rank: int
    nnodes: int
    dist_init_addr: str


def _check_nodes(deployment: Deployment, hosts: Mapping[str, HostSpec]) -> None:
    where = f"deployments.{deployment.name}.nodes"
    if len(deployment.nodes) == 1:
        raise ValueError(f"{where}: a multi-node deployment needs at least two nodes")
    if len(set(deployment.nodes)) != len(deployment.nodes):
        raise ValueError(f"{where}: a host is listed twice")
    for name in deployment.nodes:
        if name not in hosts:
            raise ValueError(f"{where}: unknown host {name!r}")
        if hosts[name].deployment != deployment.name:
            raise ValueError(f"{where}: host {name} runs deployment {hosts[name].deployment}")
    if deployment.nodes:
        strays = [
            h.name
            for h in hosts.values()
            if h.deployment == deployment.name and h.name not in deployment.nodes
        ]
        if strays:
            raise ValueError(f"{where}: hosts {', '.join(strays)} run it but are not listed")


MAX_YAML_NODES = 100_000  # far above any inventory; a 500-byte alias bomb expands to 10^9


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML loader that refuses duplicate keys (silently keeping the last one hides typos),
    keys that are not plain values, and documents whose aliases expand past MAX_YAML_NODES
    (the stock inventory's `<<: *demo` anchors stay fine: they are counted, not refused)."""

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is None:
            return node
        try:
            size = _expanded_size(node, {})
        except RecursionError:
            size = MAX_YAML_NODES + 1
        if size > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"the document expands to more than {MAX_YAML_NODES} values through its "
                "aliases (*name); refusing it",
                node.start_mark,
            )
        return node


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many nodes the document has once every alias is expanded; each distinct node is
    measured once, so a bomb costs as little as its text."""
    if id(node) in memo:
        return memo[id(node)]
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    memo[id(node)] = size = min(size, MAX_YAML_NODES + 1)
    return size


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` merges; explicit keys beside it override, as YAML says
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool) and key is not None:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"a key must be a plain value, not a {type(key).__name__} (line {mark.line + 1})",
                mark,
            )
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expand(value: Any, inventory_dir: str) -> Any:
    """Expand ${INVENTORY_DIR} in every string, so the demo can point into this checkout."""
    if isinstance(value, str):
        return value.replace("${INVENTORY_DIR}", inventory_dir)
    if isinstance(value, list):
        return [_expand(v, inventory_dir) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, inventory_dir) for k, v in value.items()}
    return value


def _describe(error: Mapping[str, Any]) -> str:
    loc = ".".join(str(p) for p in error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    msg = str(error["msg"]).removeprefix("Value error, ")
    got = error.get("input")
    if kind in {"value_error", "assertion_error"} or isinstance(got, dict | list):
        return f"{loc}: {msg}" if loc else msg
    return f"{loc}: {msg} (got {got!r})"


def parse_inventory(data: Any, path: Path) -> Inventory:
    """Validate already-loaded YAML data (pure; the file name is only for messages)."""
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: expected a mapping with 'hosts' and 'deployments'")
    data = _expand(data, str(path.resolve().parent))
    for section in ("hosts", "deployments"):
        entries = data.get(section)
        if isinstance(entries, dict):
            data[section] = {
                name: {**entry, "name": name, **({"source": path} if section == "hosts" else {})}
                if isinstance(entry, dict)
                else entry
                for name, entry in entries.items()
            }
    try:
        return Inventory.model_validate({**data, "path": path})
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors()]
        raise InventoryError(f"{path}: " + "; ".join(problems)) from None


def load_inventory(path: str | Path | None = None) -> Inventory:
    """Load and validate the inventory named, or found as firedup.config.discover says."""
    chosen = find_inventory(path)
    try:
        text = chosen.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(f"inventory file not found: {chosen}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"cannot read inventory {chosen}: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise InventoryError(f"{chosen}: not valid YAML: {exc}".replace("\n", " ")) from None
    inventory = parse_inventory(data, chosen)
    named = [(h.ssh_config, f"hosts.{h.name}.ssh_config") for h in inventory.hosts.values()]
    named += [
        (source.file, f"deployments.{d.name}.secrets.{name}")
        for d in inventory.deployments.values()
        for name, source in d.secrets.items()
    ]
    trust_named([(path, key) for path, key in named if path is not None])
    return inventory
