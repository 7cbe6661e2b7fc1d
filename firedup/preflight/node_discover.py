"""First contact with a node: what is there, in one run of its python (stdlib only, 3.8+).

Shipped after node_share.py (proc_table, user_name, topology) as `python -c TEXT JSON`;
prints one JSON object: the pythons that have sglang or vllm (and their releases), the GPUs
and who uses them, the engine servers already running (ours or not) with their ports, model
directories, the login user and home. It only looks: it starts, writes and kills nothing.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional  # the node's python, 3.8 up

# proc_table, user_name, topology: from node_share.py, shipped ahead of this file
SHARED: Dict[str, Any] = globals()

ENGINES = ("sglang", "vllm")
ENGINE_MARKS = ("sglang::", "VLLM::", "sglang.launch_server", "sglang serve", "vllm serve",
                "vllm.entrypoints")  # fmt: skip
PYTHON_GLOBS = (
    "/usr/bin/python3", "/usr/local/bin/python3", "/usr/bin/python3.*", "/usr/local/bin/python3.*",
    "~/.venv*/bin/python", "~/venv*/bin/python", "~/*/.venv/bin/python", "~/*/venv/bin/python",
    "~/miniconda3/bin/python", "~/miniconda3/envs/*/bin/python", "~/anaconda3/envs/*/bin/python",
    "~/miniforge3/envs/*/bin/python", "/opt/conda/bin/python", "/opt/conda/envs/*/bin/python",
    "/opt/*/bin/python", "/opt/*/venv/bin/python",
)  # fmt: skip
MODEL_GLOBS = ("~/models/*", "/models/*", "/data/models/*", "/mnt/models/*",
               "~/.cache/huggingface/hub/models--*/snapshots/*")  # fmt: skip
# Run by each python found: where each engine is and which release (metadata first; an
# install without dist-info is imported, as preflight does).
PROBE = r"""
import importlib.util, json, sys
out = {"version": sys.version.split()[0], "prefix": sys.prefix, "engines": {}}
for name in ("sglang", "vllm"):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec is None:
        continue
    version = None
    try:
        from importlib import metadata
        version = metadata.version(name)
    except Exception:
        try:
            version = getattr(__import__(name), "__version__", None)
        except Exception as exc:
            version = None
            out["engines"][name] = {"path": spec.origin, "version": None,
                                    "error": (type(exc).__name__ + ": " + str(exc))[:200]}
            continue
    out["engines"][name] = {"path": spec.origin, "version": version}
print(json.dumps(out))
"""


def expand(pattern: str) -> List[str]:
    return sorted(glob.glob(os.path.expanduser(pattern)))


def python_candidates() -> List[str]:
    found: List[str] = []
    seen = set()
    on_path = [shutil.which(n) for n in ("python3", "python")]
    for path in [p for p in on_path if p] + [p for g in PYTHON_GLOBS for p in expand(g)]:
        if not re.search(r"python(3(\.\d+)?)?$", path) or not os.access(path, os.X_OK):
            continue
        key = (os.path.dirname(os.path.abspath(path)), os.path.realpath(path))
        if key not in seen:
            seen.add(key)
            found.append(path)
    return found[:24]


def probe_python(path: str) -> Dict[str, object]:
    try:
        proc = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=90)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"path": path, "error": str(exc)[:200]}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"path": path, "error": (proc.stderr or "no answer").strip()[-200:]}
    return {"path": path, **json.loads(lines[-1])}


def csv(argv: List[str]) -> Optional[List[List[str]]]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return [[c.strip() for c in ln.split(",")] for ln in proc.stdout.splitlines() if ln.strip()]


def gpus(table: Dict[int, Any]) -> Dict[str, object]:
    if shutil.which("nvidia-smi") is None:
        return {"available": False, "gpus": [], "apps": []}
    fmt = "--format=csv,noheader,nounits"
    rows = csv(["nvidia-smi", "--query-gpu=index,name,memory.total,memory.used,uuid", fmt])
    apps = csv(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", fmt])
    listed = [
        {"index": int(r[0]), "name": r[1], "total_mib": float(r[2]), "used_mib": float(r[3]),
         "uuid": r[4]}
        for r in rows or [] if len(r) >= 5 and r[0].isdigit()
    ]  # fmt: skip
    users = []
    for r in apps or []:
        if len(r) >= 4 and r[0].isdigit():
            row = table.get(int(r[0]))
            user = SHARED["user_name"](row[1]) if row else ""
            users.append({"pid": int(r[0]), "name": r[1], "used_mib": float(r[2]),
                          "gpu_uuid": r[3], "user": user})  # fmt: skip
    return {"available": rows is not None, "gpus": listed, "apps": users,
            "topology": SHARED["topology"]()}  # fmt: skip


def listeners() -> Dict[int, List[int]]:
    """pid -> the TCP ports it listens on."""
    ss = shutil.which("ss", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    out: Dict[int, List[int]] = {}
    if not ss:
        return out
    try:
        text = subprocess.run([ss, "-Htlnp"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return out
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[3].rsplit(":", 1)[-1].isdigit():
            continue
        port = int(fields[3].rsplit(":", 1)[-1])
        for pid in re.findall(r"pid=(\d+)", line):
            out.setdefault(int(pid), []).append(port)
    return out


def run_of(pid: int) -> Optional[Dict[str, object]]:
    """The firedup run a server was started in: its cwd is `<workdir>/runs/<id>`."""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        with open(os.path.join(cwd, "meta.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return None
    return meta if os.path.basename(os.path.dirname(cwd)) == "runs" else None


def servers(table: Dict[int, Any], ports: Dict[int, List[int]]) -> List[object]:
    by_sid: Dict[int, Dict[str, Any]] = {}
    for pid, row in sorted(table.items()):
        sid, uid, state = row
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if state == "Z" or sid == OWN_SID or not any(m in cmd for m in ENGINE_MARKS):
            continue  # a zombie, this discovery itself (its text names the engines), no engine
        entry = by_sid.setdefault(sid, {"sid": sid, "pids": [], "ports": [], "cmdline": cmd[:300],
                                        "user": SHARED["user_name"](uid), "run": None})  # fmt: skip
        entry["pids"].append(pid)
        entry["ports"] = sorted(set(entry["ports"]) | set(ports.get(pid, [])))
        entry["run"] = entry["run"] or run_of(pid)
    return list(by_sid.values())


def models() -> List[str]:
    found = [p for g in MODEL_GLOBS for p in expand(g)]
    return [p for p in found if os.path.isfile(os.path.join(p, "config.json"))][:20]


TABLE = SHARED["proc_table"]()
OWN_SID = os.getsid(0)
PORTS = listeners()
with ThreadPoolExecutor(max_workers=4) as pool:
    pythons = list(pool.map(probe_python, python_candidates()))
    facts = {
        "user": SHARED["user_name"](os.getuid()),
        "home": os.path.expanduser("~"),
        "python": sys.executable,
        "pythonpath": [p for p in os.environ.get("PYTHONPATH", "").split(":") if p],
        "pythons": pythons,
        "gpus": gpus(TABLE),
        "servers": servers(TABLE, PORTS),
        "listening": sorted({p for ports in PORTS.values() for p in ports}),
        "models": models(),
    }
print(json.dumps(facts))
