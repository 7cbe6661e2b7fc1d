"""Run every measurement and write bench/results/report.md and report.json.

    .venv/bin/python -m bench [--quick] [--no-ansible] [--only latency,e2e,...] [--out DIR]

Starts its own sshd (tests/conftest.start_sshd), installs ansible-core into bench/.venv-ansible
on first use, and cleans up every server and sshd it started. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.biglog import run_biglog
from bench.e2e import run_e2e
from bench.fleet import run_fleet
from bench.latency import run_latency
from bench.machine import load_average, machine
from bench.markdown import render_markdown
from bench.redeploy import run_redeploy
from bench.report import latency_summary, write_reports
from bench.rig import Rig
from bench.router import run_router
from bench.slowlink import DELAY_S, run_slowlink
from bench.status import run_status, run_top
from bench.steady import run_steady
from bench.throughput import run_throughput
from bench.tools import BENCH, Ansible, ensure_ansible

SECTIONS = [
    "latency",
    "steady",
    "biglog",
    "slowlink",
    "e2e",
    "fleet",
    "redeploy",
    "throughput",
    "router",
    "status",
    "top",
]


@dataclasses.dataclass(frozen=True)
class Plan:
    repeats: int
    noise_mb: float
    fleet_sizes: list[int]
    fleet_deploys: int
    throughput_mb: float
    slow_links: list[str]
    slow_repeats: int
    fleet_status_only: list[int]


FULL = Plan(
    repeats=5,
    noise_mb=30,
    fleet_sizes=[1, 16, 64],
    fleet_deploys=2,
    throughput_mb=10,
    slow_links=["1 MB/s", "200 KB/s", "150 KB/s"],
    slow_repeats=3,
    fleet_status_only=[128],
)
QUICK = Plan(
    repeats=2,
    noise_mb=10,
    fleet_sizes=[1, 4],
    fleet_deploys=1,
    throughput_mb=3,
    slow_links=["150 KB/s"],
    slow_repeats=1,
    fleet_status_only=[],
)


def log(message: str) -> None:
    print(message, flush=True)


def _dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [i.as_dict() if hasattr(i, "as_dict") else dataclasses.asdict(i) for i in items]


def _run_sections(
    rig: Rig, quiet: Callable[[], Rig], ansible: Ansible | None, plan: Plan, only: list[str]
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    if "latency" in only:
        log("== detection latency (ready, crash)")
        samples = _dicts(run_latency(rig, ansible, plan.repeats, log))
        results["latency"] = {"summary": latency_summary(samples), "samples": samples}
    if "steady" in only:
        log("== node CPU over a quiet wait")
        quiet_samples, quiet_cmd = run_steady(
            rig, ansible, ["firedup", "loop 1s", "loop 15s", "ansible wait_for"], log
        )
        loud_rig = quiet()
        try:
            loud_samples, loud_cmd = run_steady(loud_rig, None, ["firedup", "loop 1s"], log)
        finally:
            loud_rig.close()
        results["steady"] = {
            "samples": _dicts(quiet_samples + loud_samples),
            "per_command": {"quiet ~/.bashrc": quiet_cmd, "this machine's ~/.bashrc": loud_cmd},
        }
    if "biglog" in only:
        log(f"== a wait over a {plan.noise_mb:g} MB log")
        results["biglog"] = _dicts(run_biglog(rig, ansible, plan.noise_mb, 2, log))
    if "slowlink" in only:
        log(f"== waits over slow links (+{DELAY_S * 1000:.0f} ms each way)")
        results["slowlink"] = _dicts(
            run_slowlink(rig, ansible, plan.noise_mb, plan.slow_repeats, plan.slow_links, log)
        )
    if "e2e" in only:
        log("== end-to-end deploy, instantly-ready node")
        results["e2e"] = _dicts(run_e2e(rig, ansible, plan.repeats, log))
    if "fleet" in only:
        log("== fleet scaling")
        fleet = run_fleet(rig, plan.fleet_sizes, plan.fleet_deploys, 3, log, plan.fleet_status_only)
        results["fleet"] = _dicts(fleet)
    if "redeploy" in only:
        log("== idempotent redeploy")
        results["redeploy"] = _dicts(run_redeploy(rig, plan.repeats, log))
    if "router" in only:
        log("== through the real sglang-router during a restart of every worker")
        results["router"] = run_router(rig, max(1, plan.repeats // 2), log)
    if "status" in only:
        log(f"== fab status over +{DELAY_S * 1000:.0f} ms each way")
        results["status"] = _dicts(run_status(rig, ansible, plan.repeats, log))
    if "top" in only:
        log("== node CPU of fab top's refresh")
        results["top"] = _dicts(run_top(rig, 20, max(1, plan.repeats // 2), log))
    if "throughput" in only:
        log("== log classifier throughput")
        results["throughput"] = run_throughput(plan.throughput_mb, 2, log)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    parser.add_argument("--no-ansible", action="store_true", help="skip the Ansible columns")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma list of sections")
    parser.add_argument("--out", default=str(BENCH / "results"), help="report directory")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    plan = QUICK if args.quick else FULL
    started = time.monotonic()
    exe = None if args.no_ansible else ensure_ansible(log)
    info = machine(with_ansible=exe is not None)
    log(f"machine: {info['cpu_model']}, {info['cores']} cores, load {load_average()}")
    root = Path(tempfile.mkdtemp(prefix="firedup-bench-"))
    rig = Rig(root / "quiet")
    try:
        ansible = Ansible(rig, exe) if exe is not None else None
        results = _run_sections(
            rig, lambda: Rig(root / "loud", quiet_home=False), ansible, plan, only
        )
    finally:
        rig.close()
        shutil.rmtree(root, ignore_errors=True)
    info["load_average_at_end"] = load_average()
    info["bench_wall_s"] = time.monotonic() - started
    results = {"machine": info, "plan": dataclasses.asdict(plan), **results}
    results["notes"] = [
        "The machine was shared with other work while this ran (see the load average); "
        "re-run on a quiet machine for the numbers to quote.",
    ]
    write_reports(Path(args.out), results, render_markdown(results))
    log(f"wrote {args.out}/report.md and report.json in {info['bench_wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
