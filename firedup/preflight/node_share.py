"""Who else uses this node: shipped ahead of node_facts.py (stdlib only, the node's python 3.8+).

`share_facts(args, gpus)` adds, to the facts node_facts.py gathers: the owner (user) and
session of every GPU compute process, the other slots of our workdir with their current run
and whether it lives, and the GPU topology matrix (`nvidia-smi topo -m`, raw text).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import subprocess
from typing import Dict, List, Optional, Tuple  # the node's python, 3.8 up

ProcRow = Tuple[int, int, str]


def proc_table() -> Dict[int, ProcRow]:
    table: Dict[int, ProcRow] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(stat[3]), uid, stat[0])
    return table


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def slot_dirs(roots: List[str]) -> List[str]:
    found: List[str] = []
    for root in roots:
        for path in [root, *sorted(glob.glob(os.path.join(root, "slots", "*")))]:
            if path not in found and os.path.isdir(path):
                found.append(path)
    return found


def slot_facts(roots: List[str], own: str, table: Dict[int, ProcRow]) -> List[object]:
    """Every slot under the roots but our own: its current run's meta and whether it lives
    (a non-zombie process of the run's session: the server's pid is its session)."""
    out: List[object] = []
    for path in slot_dirs(roots):
        if os.path.normpath(path) == os.path.normpath(own):
            continue
        text = read_text(os.path.join(path, "current", "meta.json"))
        pid = (read_text(os.path.join(path, "current", "pid")) or "").strip()
        try:
            meta = json.loads(text) if text else None
        except ValueError:
            meta = None
        if meta is None:
            continue
        sid = int(pid) if pid.isdigit() else -1
        alive = any(row[0] == sid and row[2] not in ("Z", "X") for row in table.values())
        # `pid starttime sid` (start.sh): when the server started, on the node's own clock
        identity = (read_text(os.path.join(path, "current", "identity")) or "").split()
        start = int(identity[1]) if len(identity) > 1 and identity[1].isdigit() else -1
        out.append({"dir": path, "meta": meta, "pid": sid, "alive": alive, "start": start})
    return out


def claim_facts(args: Dict[str, object]) -> Dict[str, object]:
    """After a start: every slot under the roots, our own included (who started first)."""
    roots = [str(r) for r in args.get("slot_roots", [])]  # type: ignore[attr-defined]
    return {"slots": slot_facts(roots, "", proc_table())}


def topology() -> Optional[str]:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def share_facts(
    args: Dict[str, object], gpus: Dict[str, object], topo: Optional[str]
) -> Dict[str, object]:
    table = proc_table()
    for app in gpus.get("apps", []) or []:  # type: ignore[attr-defined]
        row = table.get(app["pid"])
        app["user"] = user_name(row[1]) if row else ""
        app["sid"] = row[0] if row else -1
    roots = [str(r) for r in args.get("slot_roots", [])]  # type: ignore[attr-defined]
    return {
        "slots": slot_facts(roots, str(args.get("workdir", "")), table),
        "topology": topo if gpus.get("available") else None,
    }
