"""`fab discover`, pure: the entry from what a node said (recorded facts), loadable as is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from firedup.config.inventory import parse_inventory
from firedup.ops.discover import Contact, best_engine, entry_text, summary

UUID = "GPU-5f1c0a2e-7d3b-4c1a-9e0f-00000000000{}"
FACTS: dict[str, Any] = {
    "user": "ops",
    "home": "/home/ops",
    "python": "/usr/bin/python3",
    "pythonpath": ["/opt/sim/python"],
    "pythons": [
        {"path": "/usr/bin/python3", "version": "3.11.2", "engines": {}},
        {"path": "/home/ops/venv-old/bin/python", "version": "3.10.12",
         "engines": {"sglang": {"path": "/home/ops/venv-old/lib/sglang/__init__.py",
                                "version": "0.5.9"}}},
        {"path": "/home/ops/venv/bin/python", "version": "3.11.9",
         "engines": {"sglang": {"path": "/opt/sim/python/sglang/__init__.py", "version": "0.5.10"},
                     "vllm": {"path": "/home/ops/venv/lib/vllm/__init__.py", "version": "0.33.0"}}},
    ],
    "gpus": {
        "available": True,
        "gpus": [{"index": i, "name": "NVIDIA H200", "total_mib": 143771.0,
                  "used_mib": 61440.0 if i == 0 else 0.0, "uuid": UUID.format(i)}
                 for i in range(2)],
        "apps": [{"pid": 4242, "name": "python3\x1b]52;c;x\x07", "used_mib": 61440.0,
                  "gpu_uuid": UUID.format(0), "user": "bob"}],
    },
    "servers": [
        {"sid": 4242, "pids": [4242], "ports": [30000], "user": "bob", "run": None,
         "cmdline": "python3 -m sglang.launch_server --port 30000"},
        {"sid": 5000, "pids": [5000], "ports": [], "user": "ops",
         "run": {"host": "gpu-a", "run_id": "r1"}, "cmdline": "sglang::router --port 30001"},
    ],
    "listening": [22, 30000, 30002],
    "models": ["/home/ops/models/llama"],
}  # fmt: skip


def test_the_entry_loads_as_printed_and_picks_the_newest_sglang() -> None:
    contact = Contact(address="gpu-7.lab", port=2222, identity_file="~/.ssh/id_lab")
    text = entry_text(FACTS, contact)
    inv = parse_inventory(yaml.safe_load(text), Path("pasted.yaml"))
    host = inv.hosts["gpu-7.lab"]
    assert host.python == "/home/ops/venv/bin/python" and host.port == 2222
    assert host.user == "ops" and host.workdir == "/home/ops/firedup"
    assert host.env == {"PYTHONPATH": "/opt/sim/python"}  # found through the login env
    d = inv.deployment_for(host)
    assert (d.engine.value, d.model, d.gpus) == ("sglang", "/home/ops/models/llama", "auto")
    assert d.port == 30003  # 30000 and its neighbours are taken (30001 by a server's flag)
    found = best_engine(FACTS)
    assert found is not None and found.version == "0.5.10"


def test_the_summary_names_users_servers_and_keeps_to_plain_lines() -> None:
    lines = summary(FACTS)
    assert any("GPU 0 NVIDIA H200" in ln and "pid 4242" in ln and "user bob" in ln for ln in lines)
    assert "GPU 1 NVIDIA H200 0/143771 MiB: free" in lines
    assert any("port 30000, not ours (user bob)" in ln for ln in lines)
    assert any("port 30001, ours: host gpu-a, run r1" in ln for ln in lines)
    assert all(ln.isprintable() for ln in lines)  # another user's escape sequence is inert
