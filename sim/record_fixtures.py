#!/usr/bin/env python3
"""Regenerate tests/fixtures/logs/sim/<engine>-<scenario>.log from the simulated node.

Every scenario of sim/scenarios.py is launched (several at once: they mostly sleep), driven
the way an operator would (ready ones get a few requests, then SIGTERM; hangs are stopped after
a quiet spell) and its log is copied next to the other log fixtures.

    python3 sim/record_fixtures.py [--speed 2] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios
import simrun

OUT = simrun.REPO / "tests" / "fixtures" / "logs" / "sim"


def exercise(run: simrun.SimRun) -> None:
    """Once ready: a health check, a model list, one generation, one decode-stats line."""
    run.http_status("/health")
    run.http_status("/v1/models")
    if run.scenario.engine == "sglang":
        run.post_json("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 8}})
        if "--speculative-algorithm" in run.scenario.args:
            run.wait_text("accept len:", 30)
    else:
        run.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 8})


def drive(run: simrun.SimRun, timeout_s: float) -> str:
    scenario = run.scenario
    run.start()
    try:
        if scenario.expect == "ready":
            if not run.wait_for(lambda: run.http_status("/health", 1) == 200, timeout_s, 0.1):
                return "never became ready"
            exercise(run)
            if "crash_after_ready" in scenario.env.get("FIREDUP_SIM_FAULT", ""):
                run.wait_exit(timeout_s)
        elif scenario.expect == "exit":
            if run.wait_exit(timeout_s) is None:
                return "did not exit"
        elif not run.wait_hang(3.0, timeout_s):
            return "never went quiet"
        missing = [t for t in scenario.texts if t not in run.log()]
        return f"missing {missing}" if missing else "ok"
    finally:
        run.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=float, default=2.0, help="FIREDUP_SIM_SPEED (default 2)")
    parser.add_argument("--only", nargs="*", help="fixture names, e.g. sglang-tiny-ready")
    parser.add_argument("--jobs", type=int, default=6)
    opts = parser.parse_args()
    chosen = [s for s in scenarios.SCENARIOS if not opts.only or s.fixture_name[:-4] in opts.only]
    OUT.mkdir(parents=True, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="firedup-sim-fixtures-") as tmp:
        runs = [simrun.SimRun(s, Path(tmp) / s.fixture_name[:-4], opts.speed) for s in chosen]
        with ThreadPoolExecutor(opts.jobs) as pool:
            verdicts = list(pool.map(lambda r: drive(r, 120.0), runs))
        for run, verdict in zip(runs, verdicts, strict=True):
            print(f"{run.scenario.fixture_name:50} {verdict}")
            if verdict == "ok":
                shutil.copyfile(run.log_path, OUT / run.scenario.fixture_name)
            else:
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
