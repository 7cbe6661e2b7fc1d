"""Idempotent redeploy: what a deploy costs before its launch when nothing has changed.

The node has a private copy of the simulated sglang 0.5.9 (a site directory on PYTHONPATH)
and the deployment lists the Kimi-K2.5 EAGLE-3 patch. The first sync applies it (measured
once, for scale); then each measured round opens a fresh connection and runs what a deploy
runs before starting the server: `sync_patches` (the patch is already applied) and
`plan_deploy` (render + `bash -n`). Measured: time, remote commands, bytes uploaded (file
contents put on the node), and the bytes on the wire (a counting SlowLink relay).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.rig import CountingNode, Rig
from firedup.config.inventory import Deployment, HostSpec
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy
from firedup.patching import sync_patches
from tests.conftest import REPO, SIM_MODELS, free_port
from tests.slowlink import SlowLink

PATCH = "kimi-k25-eagle3-hooks"


@dataclass
class SyncSample:
    kind: str  # "first apply" | "idempotent"
    wall_s: float
    remote_ops: int
    bytes_uploaded: int
    wire_to_node: int
    wire_from_node: int
    outcome: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _host(rig: Rig, meter: SlowLink) -> tuple[HostSpec, Deployment]:
    workdir = rig.fresh_dir("redeploy")
    site = workdir / "site"
    shutil.copytree(REPO / "sim" / "python", site, ignore=shutil.ignore_patterns("__pycache__"))
    host = rig.host_entry(workdir, "d", PYTHONPATH=str(site))
    host["port"] = meter.port
    deployment = {
        "engine": "sglang",
        "model": str(SIM_MODELS / "tiny-llama"),
        "port": free_port(),
        "patches": [PATCH],
    }
    inv, _ = rig.inventory(workdir, {"n": host}, {"d": deployment})
    spec = inv.host("n")
    return spec, inv.deployment_for(spec)


def _round(kind: str, spec: HostSpec, deployment: Deployment, meter: SlowLink) -> SyncSample:
    up0, down0 = meter.snapshot()
    t0 = time.monotonic()
    node = CountingNode(SshNode(spec))
    try:
        report = sync_patches(node, spec, deployment)
        plan_deploy(spec, deployment)
    finally:
        node.close()
    wall = time.monotonic() - t0
    up, down = meter.snapshot()
    outcome = "; ".join(report.lines())
    return SyncSample(
        kind, wall, sum(node.calls.values()), node.bytes_up, up - up0, down - down0, outcome
    )


def run_redeploy(rig: Rig, repeats: int, log: Callable[[str], None]) -> list[SyncSample]:
    meter = SlowLink(rig.sshd.port)
    rig.trust_port(meter.port)
    try:
        spec, deployment = _host(rig, meter)
        samples = [_round("first apply", spec, deployment, meter)]
        samples += [_round("idempotent", spec, deployment, meter) for _ in range(repeats)]
    finally:
        meter.close()
    for s in samples:
        log(
            f"  {s.kind:12s} {s.wall_s:5.2f}s  ops={s.remote_ops}  uploaded={s.bytes_uploaded} B  "
            f"wire to/from node {s.wire_to_node}/{s.wire_from_node} B  {s.outcome}"
        )
    return samples
