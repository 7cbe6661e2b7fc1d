"""Shared GPU nodes, pure (issue 22): the topology matrix as nvidia-smi prints it, `gpus:` and
CUDA_VISIBLE_DEVICES at load and in the launch, the auto choice, and the checks that judge the
chosen GPUs only (other users' processes, our other slots)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec, parse_inventory
from firedup.errors import InventoryError
from firedup.launch.render import render_launch
from firedup.preflight.checks import Situation, run_checks
from firedup.preflight.facts import parse_facts
from firedup.preflight.gpuchoice import with_choice
from firedup.preflight.model import Outcome
from firedup.preflight.sharing import parse_topology

FACTS: dict[str, Any] = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "preflight" / "story-node.json").read_text()
)
UUID = "GPU-5f1c0a2e-7d3b-4c1a-9e0f-{:012x}"
# `nvidia-smi topo -m` of an 8 x H100 SXM board (NVSwitch), tab-separated as the driver
# prints it, the double tab before GPU NUMA ID included.
NVSWITCH = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    + "".join(
        f"GPU{a}"
        + "".join("\t X " if a == b else "\tNV18" for b in range(8))
        + ("\t0-51\t0\t\tN/A\n" if a < 4 else "\t52-103\t1\t\tN/A\n")
        for a in range(8)
    )
    + "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)
# A PCIe box, pasted with spaces (GPU1-2 and GPU3-4 share a host bridge; GPU0 is alone on
# the other socket), as in a public benchmark thread.
PCIE = (
    "\n".join(
        (
            "        GPU0    GPU1    GPU2    GPU3    GPU4    CPU Affinity    "
            "NUMA Affinity   GPU NUMA ID",
            "GPU0     X      SYS     SYS     SYS     SYS     8-15,24-31      1               N/A",
            "GPU1    SYS      X      PHB     NODE    NODE    0-7,16-23       0               N/A",
            "GPU2    SYS     PHB      X      NODE    NODE    0-7,16-23       0               N/A",
            "GPU3    SYS     NODE    NODE     X      PHB     0-7,16-23       0               N/A",
            "GPU4    SYS     NODE    NODE    PHB      X      0-7,16-23       0               N/A",
        )
    )
    + "\n"
)
# An older driver: NIC columns and rows, no NUMA Affinity column.
WITH_NICS = """\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity
GPU0\t X \tNV6\tPIX\tSYS\t0-23,48-71
GPU1\tNV6\t X \tPIX\tSYS\t0-23,48-71
mlx5_0\tPIX\tPIX\t X \tSYS\t
"""


def test_the_topology_matrix_reads_as_the_driver_prints_it() -> None:
    topo = parse_topology(NVSWITCH)
    assert topo.link(0, 7) == "NV18" and topo.link(3, 3) == "X"
    assert topo.numa == {i: "0" if i < 4 else "1" for i in range(8)}
    pcie = parse_topology(PCIE)
    assert pcie.link(1, 2) == "PHB" and pcie.link(0, 4) == "SYS" and pcie.numa[0] == "1"
    nics = parse_topology(WITH_NICS)
    assert nics.link(0, 1) == "NV6" and nics.numa == {} and (0, 2) not in nics.links
    assert parse_topology(None).links == {} and parse_topology("garbage\n").links == {}


def facts(
    gpus: int = 8,
    apps: list[tuple[int, int, str, int]] = (),  # type: ignore[assignment]
    topology: str = NVSWITCH,
    slots: list[dict[str, Any]] = (),  # type: ignore[assignment]
    processes: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """The story node's facts with `apps` = (gpu, pid, user, MiB) holding memory."""
    data = copy.deepcopy(FACTS)
    rows = []
    for i in range(gpus):
        used = float(sum(m for g, _, _, m in apps if g == i))
        rows.append(
            {"index": i, "name": "NVIDIA H200", "total_mib": 143771.0, "used_mib": used,
             "free_mib": 143771.0 - used, "uuid": UUID.format(i)}
        )  # fmt: skip
    data["gpus"] = {
        "available": True,
        "gpus": rows,
        "apps": [
            {"pid": pid, "name": "python3", "used_mib": float(m), "gpu_uuid": UUID.format(g),
             "user": user, "sid": pid}
            for g, pid, user, m in apps
        ],
    }  # fmt: skip
    data["processes"] = list(processes)
    data["share"] = {"slots": list(slots), "topology": topology}
    return data


def judge(
    deployment: dict[str, Any], data: dict[str, Any], env: dict[str, str] | None = None
) -> tuple[Situation, dict[str, tuple[Outcome, str]]]:
    d = Deployment.model_validate(
        {"name": "d", "engine": "sglang", "model": "/data/models/kimi-k25", "port": 30123,
         **deployment}
    )  # fmt: skip
    s = Situation(parse_facts(data), d, None, None, None, False)
    s = with_choice(s, {**(env or {}), **d.env})
    return s, {c.name: (c.outcome, c.detail) for c in run_checks(s)}


BOB_ON_0_3 = [(g, 4242, "bob", 61440) for g in range(4)]


def test_auto_takes_the_free_gpus_and_says_why() -> None:
    s, result = judge({"tp": 4, "gpus": "auto"}, facts(apps=BOB_ON_0_3))
    assert s.gpus_chosen == (4, 5, 6, 7)
    assert result["gpu set"][0] is Outcome.PASS
    assert "one NUMA node (1)" in s.gpus_why and "NV18" in s.gpus_why
    assert "GPUs 0,1,2,3: pid 4242 (python3, user bob" in s.gpus_why
    assert result["gpu users"][0] is Outcome.PASS and result["gpus"][0] is Outcome.PASS


def test_auto_prefers_one_numa_node_then_the_closest_pcie_pair() -> None:
    s, _ = judge({"tp": 2, "gpus": "auto"}, facts(apps=[(0, 9, "x", 100)], topology=NVSWITCH))
    assert s.gpus_chosen == (1, 2)  # both on NUMA 0; 1 and 4 would span the sockets
    s, _ = judge({"tp": 2, "gpus": "auto"}, facts(gpus=5, topology=PCIE))
    assert s.gpus_chosen == (1, 2)  # PHB beats NODE and SYS
    s, _ = judge({"tp": 2, "gpus": "auto"}, facts(gpus=5, apps=[(2, 9, "x", 10)], topology=PCIE))
    assert s.gpus_chosen == (3, 4)


def test_auto_with_too_few_free_gpus_fails_naming_who_holds_them() -> None:
    _, result = judge({"tp": 8, "gpus": "auto"}, facts(apps=BOB_ON_0_3))
    outcome, detail = result["gpu set"]
    assert outcome is Outcome.FAIL
    assert "4 of 8 GPU(s) free" in detail and "needs 8" in detail and "user bob" in detail


def test_a_listed_busy_set_fails_naming_pid_and_user() -> None:
    s, result = judge({"tp": 4, "gpus": [0, 1, 2, 3]}, facts(apps=BOB_ON_0_3))
    outcome, detail = result["gpu users"]
    assert outcome is Outcome.FAIL
    assert "GPUs 0,1,2,3: pid 4242 (python3, user bob, 60.0 GiB)" in detail
    assert s.gpus_chosen == (0, 1, 2, 3)


def test_memory_is_judged_on_the_chosen_gpus_only() -> None:
    """A node whose GPUs 0-3 are full: a deployment on 4-7 asking 0.9 of each passes (the
    check used to look at GPU 0)."""
    _, result = judge({"tp": 4, "gpus": [4, 5, 6, 7], "mem_fraction": 0.9}, facts(apps=BOB_ON_0_3))
    assert result["gpus"][0] is Outcome.PASS, result["gpus"]
    _, result = judge({"tp": 4, "mem_fraction": 0.9}, facts(apps=BOB_ON_0_3))
    assert result["gpus"][0] is Outcome.FAIL  # no `gpus:`: the engine takes 0-3


def test_cuda_visible_devices_in_env_means_the_same_as_gpus() -> None:
    s, result = judge({"tp": 4, "env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}}, facts(apps=BOB_ON_0_3))
    assert s.gpus_chosen == (0, 1, 2, 3) and result["gpu users"][0] is Outcome.FAIL
    s, _ = judge({"tp": 2}, facts(), env={"CUDA_VISIBLE_DEVICES": "6,7"})  # the host's env
    assert s.gpus_chosen == (6, 7)


def test_a_gpu_the_node_lacks_is_named() -> None:
    _, result = judge({"tp": 2, "gpus": [7, 9]}, facts())
    assert result["gpu set"] == (Outcome.FAIL, result["gpu set"][1])
    assert "GPU(s) 9 are not on this node" in result["gpu set"][1]


def slot(name: str, pid: int, gpus: list[int] | None, alive: bool = True) -> dict[str, Any]:
    return {
        "dir": f"/srv/fd/slots/{name}",
        "pid": pid,
        "alive": alive,
        "meta": {"host": f"h-{name}", "slot": name, "run_id": f"r-{name}", "deployment": name,
                 "port": 30000 + pid % 100, "gpus": gpus},
    }  # fmt: skip


def test_an_overlap_with_live_slots_is_refused_naming_each() -> None:
    ours = [(g, 100 if g < 4 else 200, "root", 50000) for g in range(8)]
    data = facts(
        apps=ours,
        slots=[slot("a", 100, [0, 1, 2, 3]), slot("b", 200, [4, 5, 6, 7]), slot("c", 300, [])],
        processes=[{"pid": 100, "sid": 100, "cmdline": "sglang::scheduler_TP0"},
                   {"pid": 200, "sid": 200, "cmdline": "sglang::scheduler_TP0"}],
    )  # fmt: skip
    _, result = judge({"tp": 4, "gpus": [2, 3, 4, 5]}, data)
    outcome, detail = result["slots"]
    assert outcome is Outcome.FAIL
    assert "GPUs 2,3 are used by slot a (host h-a, run r-a" in detail
    assert "GPUs 4,5 are used by slot b (host h-b, run r-b" in detail
    assert result["gpu users"][0] is Outcome.PASS  # ours: named as slots, not as strangers
    assert result["leftovers"][0] is Outcome.PASS  # a live slot's processes are no leftovers
    _, result = judge({"tp": 4, "gpus": "auto"}, data)
    assert result["gpu set"][0] is Outcome.FAIL and "slot a" in result["gpu set"][1]


def test_a_dead_slot_or_one_without_a_record_frees_its_gpus() -> None:
    data = facts(slots=[slot("a", 100, [0, 1, 2, 3], alive=False), slot("b", 200, None)])
    s, result = judge({"tp": 4, "gpus": "auto"}, data)
    assert s.gpus_chosen == (0, 1, 2, 3) and result["slots"][0] is Outcome.PASS


def test_gpus_at_load() -> None:
    base = {"engine": "sglang", "model": "/m", "tp": 4}
    assert Deployment.model_validate({**base, "gpus": [4, 5, 6, 7]}).gpu_set == (4, 5, 6, 7)
    for bad, said in (
        ([0, 1], "2 GPU(s) listed"),
        ([0, 0, 1, 2], "names a GPU twice"),
        ("some", "auto"),
        ([-1, 0, 1, 2], "greater than or equal to 0"),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            Deployment.model_validate({**base, "gpus": bad})
    with pytest.raises(ValueError, match="say different things"):
        Deployment.model_validate(
            {**base, "gpus": [0, 1, 2, 3], "env": {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}}
        )
    hosts = {"h": {"address": "n", "workdir": "/w", "deployment": "d",
                   "env": {"CUDA_VISIBLE_DEVICES": "1"}}}  # fmt: skip
    with pytest.raises(InventoryError, match=re.escape("hosts.h with deployment d")):
        parse_inventory(
            {"hosts": hosts, "deployments": {"d": {**base, "gpus": "auto"}}}, Path("x.yaml")
        )


def test_the_launch_exports_the_chosen_gpus_in_nvidia_smi_order() -> None:
    host = HostSpec(name="h", address="n", workdir="/w", deployment="d")
    listed = Deployment.model_validate(
        {"name": "d", "engine": "vllm", "model": "/m", "tp": 2, "gpus": [6, 7]}
    )
    text = render_launch(host, listed, run_id="r", rundir="/w/runs/r").text
    assert "export CUDA_VISIBLE_DEVICES=6,7" in text
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in text
    auto = listed.model_copy(update={"gpus": "auto"})
    assert "CUDA_VISIBLE_DEVICES" not in render_launch(host, auto, run_id="r", rundir="/w").text
    chosen = render_launch(host, auto, run_id="r", rundir="/w", gpus=(2, 3)).text
    assert "export CUDA_VISIBLE_DEVICES=2,3" in chosen
    plain = listed.model_copy(update={"gpus": None})
    assert "CUDA_" not in render_launch(host, plain, run_id="r", rundir="/w").text


def test_of_two_runs_claiming_a_gpu_at_once_the_later_gives_way() -> None:
    from firedup.preflight.claim import rival
    from firedup.preflight.sharing import parse_slots

    def at(name: str, start: int, gpus: list[int], alive: bool = True) -> dict[str, Any]:
        return {**slot(name, 100 + start, gpus, alive), "start": start}

    slots = parse_slots([at("a", 50, [0, 1]), at("b", 60, [1, 2]), at("c", 40, [5])])
    assert rival(slots, "/srv/fd/slots/a", (0, 1)) is None  # a started first
    found = rival(slots, "/srv/fd/slots/b", (1, 2))
    assert found is not None and found.slot == "a"
    dead = parse_slots([at("a", 50, [0, 1], alive=False), at("b", 60, [1, 2])])
    assert rival(dead, "/srv/fd/slots/b", (1, 2)) is None
    tie = parse_slots([at("a", 50, [0]), at("b", 50, [0])])
    assert rival(tie, "/srv/fd/slots/b", (0,)) is not None  # the directory breaks a tie
    assert rival(tie, "/srv/fd/slots/a", (0,)) is None
