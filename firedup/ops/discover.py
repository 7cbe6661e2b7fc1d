"""`fab discover`: first contact with a node over SSH, and an inventory entry ready to paste.

One run of the node's python (firedup/preflight/node_discover.py) says what is there; the rest
is pure: which python has which engine release, the GPUs and who uses them, the servers
already running (ours: started in a firedup run directory; or not) with their ports, and an
inventory document (hosts + deployments) that the loader accepts as it is printed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from firedup.config.inventory import HostSpec, parse_inventory
from firedup.errors import RemoteCommandError
from firedup.node.base import Node

ENGINE_ORDER = ("sglang", "vllm")  # SGLang first (the story's engine), then vLLM
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000}


@cache
def _snippet() -> str:
    here = resources.files("firedup.preflight")
    parts = [here.joinpath(n).read_text("utf-8") for n in ("node_share.py", "node_discover.py")]
    future = "from __future__ import annotations\n"
    return future + "".join("\n" + p.replace(future, "", 1) for p in parts)


def gather(node: Node, python: str = "python3") -> dict[str, Any]:
    result = node.run([python, "-c", _snippet(), "{}"], timeout_s=180, check=False)
    lines = [ln for ln in result.out.splitlines() if ln.startswith("{")]
    if not result.ok or not lines:
        raise RemoteCommandError(result, f"discovery with the node's {python}")
    data: dict[str, Any] = json.loads(lines[-1])
    return data


@dataclass(frozen=True)
class Found:
    python: str
    engine: str
    version: str
    path: str


def engines_found(facts: dict[str, Any]) -> list[Found]:
    out = []
    for py in facts.get("pythons", []):
        for name, eng in (py.get("engines") or {}).items():
            out.append(Found(py["path"], name, str(eng.get("version") or "?"), eng.get("path", "")))
    return out


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


def best_engine(facts: dict[str, Any]) -> Found | None:
    """SGLang over vLLM, then the newest release."""
    found = engines_found(facts)
    if not found:
        return None
    return max(found, key=lambda f: (-ENGINE_ORDER.index(f.engine), _release(f.version)))


def server_port(server: dict[str, Any]) -> list[int]:
    ports = list(server.get("ports") or [])
    match = re.search(r"--port[= ](\d+)", server.get("cmdline", ""))
    if not ports and match:
        ports = [int(match.group(1))]
    return ports


def free_port(facts: dict[str, Any], engine: str) -> int:
    taken = {p for s in facts.get("servers", []) for p in server_port(s)}
    taken |= set(facts.get("listening") or ())
    port = DEFAULT_PORTS.get(engine, 30000)
    while port in taken:
        port += 1
    return port


def _printable(text: str) -> str:
    """One line of plain text: what other users named their processes never reaches the
    terminal as control characters, nor breaks out of a YAML comment."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def summary(facts: dict[str, Any]) -> list[str]:
    """What was found, as lines (printed as YAML comments above the entry)."""
    return [_printable(line) for line in _summary(facts)]


def _summary(facts: dict[str, Any]) -> list[str]:
    lines = [f"node: user {facts.get('user')}, home {facts.get('home')}"]
    for py in facts.get("pythons", []):
        engines = py.get("engines") or {}
        has = ", ".join(f"{n} {e.get('version') or '?'}" for n, e in engines.items()) or "no engine"
        lines.append(f"python {py['path']} ({py.get('version', '?')}): {has}")
    gpus = facts.get("gpus") or {}
    if not gpus.get("available"):
        lines.append("GPUs: none (no working nvidia-smi)")
    uuid_index = {g["uuid"]: g["index"] for g in gpus.get("gpus", [])}
    for g in gpus.get("gpus", []):
        users = [
            f"pid {a['pid']} {a['name']} (user {a.get('user') or '?'}, {a['used_mib']:.0f} MiB)"
            for a in gpus.get("apps", [])
            if uuid_index.get(a["gpu_uuid"]) == g["index"]
        ]
        used = f"{g['used_mib']:.0f}/{g['total_mib']:.0f} MiB"
        lines.append(f"GPU {g['index']} {g['name']} {used}: {'; '.join(users) or 'free'}")
    for s in facts.get("servers", []):
        run = s.get("run")
        whose = (
            f"ours: host {run.get('host')}, run {run.get('run_id')}"
            if run
            else f"not ours (user {s.get('user')})"
        )
        ports = ",".join(map(str, server_port(s))) or "no port yet"
        lines.append(f"server pid {s['sid']} port {ports}, {whose}: {s.get('cmdline', '')[:120]}")
    if not facts.get("servers"):
        lines.append("servers: none running")
    return lines


@dataclass(frozen=True)
class Contact:
    """How discover reached the node: what the printed entry says about it."""

    address: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    accept_new: bool = False


def host_name(address: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "-", address).strip("-._") or "node"
    return name if name[0].isalnum() else f"n{name}"


def entry(facts: dict[str, Any], contact: Contact) -> dict[str, Any]:
    """The inventory document: one host, one deployment (pure)."""
    best = best_engine(facts)
    engine = best.engine if best else "sglang"
    name = host_name(contact.address)
    host: dict[str, Any] = {"address": contact.address}
    for key in ("user", "port", "identity_file", "known_hosts"):
        value = getattr(contact, key)
        if value is not None:
            host[key] = value
    if contact.user is None and facts.get("user"):
        host["user"] = facts["user"]
    if contact.accept_new:
        host["host_key_policy"] = "accept-new"
    host["python"] = best.python if best else "python3"
    host["workdir"] = f"{facts.get('home') or '/tmp'}/firedup"
    via = [p for p in facts.get("pythonpath", []) if best and best.path.startswith(p + "/")]
    if via:  # the engine was found through the login environment's PYTHONPATH: say so
        host["env"] = {"PYTHONPATH": ":".join(via)}
    host["deployment"] = f"{name}-{engine}"
    models = facts.get("models") or []
    deployment: dict[str, Any] = {
        "engine": engine,
        "model": models[0] if models else "/path/to/model",
        "port": free_port(facts, engine),
        "tp": 1,
    }
    if (facts.get("gpus") or {}).get("available"):
        deployment["gpus"] = "auto"
    return {"hosts": {name: host}, "deployments": {f"{name}-{engine}": deployment}}


def entry_text(facts: dict[str, Any], contact: Contact) -> str:
    """The found facts as comments, then the entry; checked by the loader before it is shown."""
    doc = entry(facts, contact)
    parse_inventory(json.loads(json.dumps(doc)), Path("discovered.yaml"))  # what deploy reads
    notes = summary(facts)
    if not (facts.get("models")):
        notes.append("no model directory found: set deployments.*.model")
    comments = "".join(f"# {line}\n" for line in notes)
    return comments + yaml.safe_dump(doc, sort_keys=False)


def contact_spec(contact: Contact) -> HostSpec:
    """The host entry discover connects with (no workdir is used: it only looks)."""
    data: dict[str, Any] = {
        "name": host_name(contact.address),
        "address": contact.address,
        "workdir": "/tmp",
        "deployment": "-",
    }
    for key in ("user", "port", "identity_file", "known_hosts"):
        if getattr(contact, key) is not None:
            data[key] = getattr(contact, key)
    if contact.accept_new:
        data["host_key_policy"] = "accept-new"
    return HostSpec.model_validate(data)
