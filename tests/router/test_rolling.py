"""Behind the real sglang-router: workers join only when truly ready, leave and drain before
a stop, and a rolling restart of the fleet fails no request (issue 26)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fab
from tests.loadgen import Load
from tests.router.conftest import RealRouter, change_deployment, change_env

pytestmark = [pytest.mark.ssh, pytest.mark.slow]
NAMES = ["w1", "w2", "w3"]


def runs_of(inv: Path) -> dict[str, str]:
    done = fab("status", "--host", "fleet", "--inventory", str(inv), "--json")
    return {h["host"]: h["run_id"] for h in json.loads(done.stdout)["hosts"]}


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


class RouterWatch:
    """The router's list sampled every 50 ms while a roll goes on: the fewest healthy workers
    it ever listed, and each time a worker came back into the list."""

    def __init__(self, router: RealRouter) -> None:
        self.router = router
        self.fewest = 99
        self.seen: list[tuple[float, frozenset[str]]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            listed = self.router.workers()
            healthy = frozenset(url for url, ok in listed.items() if ok)
            self.fewest = min(self.fewest, len(healthy))
            self.seen.append((time.monotonic(), healthy))
            self.stop.wait(0.05)

    def __enter__(self) -> RouterWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def deployed(fleet: Callable[[list[str]], Path], router: RealRouter) -> Path:
    inv = fleet(NAMES)
    done = fab("deploy", "--host", "fleet", "--inventory", str(inv), "--plain", timeout_s=180)
    assert done.returncode == 0, done.stderr
    assert len(router.workers()) == 3 and all(router.workers().values()), router.workers()
    return inv


def test_a_rolling_restart_behind_the_real_router_fails_no_request(
    fleet: Callable[[list[str]], Path], real_router: RealRouter
) -> None:
    inv = deployed(fleet, real_router)
    before = runs_of(inv)
    with RouterWatch(real_router) as watch, Load(real_router.url, rate_per_s=8) as load:
        time.sleep(1.0)  # traffic flowing before the roll begins
        done = fab(
            "restart", "--rolling", "--host", "fleet", "--inventory", str(inv), "--json",
            timeout_s=300,
        )  # fmt: skip
        time.sleep(1.0)
    assert done.returncode == 0, done.stderr
    summary = load.tally.summary()
    assert summary["failed"] == 0 and load.tally.ok > 40, summary
    after = runs_of(inv)
    assert all(after[n] and after[n] != before[n] for n in NAMES), (before, after)
    assert watch.fewest >= 2, "the roll took out more than one worker at a time"
    assert len(real_router.workers()) == 3 and all(real_router.workers().values())
    # Each worker rejoined only once truly ready: its `ready` phase came before the join,
    # and it left the router before anything stopped it.
    stream = events(done.stdout)
    for name in NAMES:
        mine = [e for e in stream if e["host"] == name]
        texts = [e.get("text", "") for e in mine]
        left = next(i for i, t in enumerate(texts) if t.startswith("router: left"))
        started = next(i for i, e in enumerate(mine) if e["event"] == "started")
        ready = next(i for i, e in enumerate(mine) if e.get("phase") == "ready")
        joined = next(i for i, t in enumerate(texts) if t.startswith("router: joined"))
        assert left < started < ready < joined, texts
    # One at a time: w2 left only after w1 had joined again.
    at = {
        (e["host"], e["text"].split(" ")[1]): e["at"]
        for e in stream
        if e.get("text", "").startswith("router: ")
        and e["text"].split(" ")[1] in ("left", "joined")
    }
    assert at[("w1", "joined")] < at[("w2", "left")] < at[("w2", "joined")] < at[("w3", "left")]


def test_a_worker_whose_new_launch_fails_stops_the_roll_and_the_rest_keep_serving(
    fleet: Callable[[list[str]], Path], real_router: RealRouter
) -> None:
    inv = deployed(fleet, real_router)
    before = runs_of(inv)
    w2_url = f"http://127.0.0.1:{_port(inv, 'w2')}"
    # w2's next launch dies while loading (an OOM nothing could predict before launch).
    change_env(inv, "w2", FIREDUP_SIM_FAULT="oom_load")
    with RouterWatch(real_router) as watch, Load(real_router.url, rate_per_s=8) as load:
        done = fab(
            "restart", "--rolling", "--host", "fleet", "--inventory", str(inv), "--plain",
            timeout_s=300,
        )  # fmt: skip
        time.sleep(0.5)
    assert done.returncode != 0
    assert "rolling restart stopped: w2 failed" in done.stderr, done.stderr
    assert "oom" in done.stderr
    after = runs_of(inv)
    assert after["w1"] != before["w1"]  # restarted
    assert after["w3"] == before["w3"]  # never reached: still its old run, serving
    assert load.tally.summary()["failed"] == 0, load.tally.summary()
    # The router never received the failed worker: once w2 left, it never came back.
    left_at = next(t for t, healthy in watch.seen if w2_url not in healthy)
    assert all(w2_url not in healthy for t, healthy in watch.seen if t >= left_at)
    assert w2_url not in real_router.workers()
    assert sorted(real_router.workers()) == sorted(
        f"http://127.0.0.1:{_port(inv, n)}" for n in ("w1", "w3")
    )


def test_a_bad_flag_stops_the_roll_before_the_worker_leaves_the_router(
    fleet: Callable[[list[str]], Path], real_router: RealRouter
) -> None:
    inv = deployed(fleet, real_router)
    before = runs_of(inv)
    change_deployment(inv, "w2", args={"not-a-flag-of-sglang": True})
    with Load(real_router.url, rate_per_s=8) as load:
        done = fab(
            "restart", "--rolling", "--host", "fleet", "--inventory", str(inv), "--plain",
            timeout_s=300,
        )  # fmt: skip
    assert done.returncode != 0
    print("STDERR", done.stderr)
    print("STDOUT", done.stdout)
    assert "not-a-flag-of-sglang" in done.stderr + done.stdout
    after = runs_of(inv)
    assert after["w1"] != before["w1"] and after["w2"] == before["w2"] == after["w2"]
    assert after["w3"] == before["w3"]
    assert load.tally.summary()["failed"] == 0, load.tally.summary()
    assert len(real_router.workers()) == 3  # w2 refused by preflight: it never left


def test_stop_behind_the_router_removes_the_worker_first_and_answers_in_flight_requests(
    fleet: Callable[[list[str]], Path], real_router: RealRouter
) -> None:
    inv = deployed(fleet, real_router)
    with Load(real_router.url, rate_per_s=10) as load:
        time.sleep(0.5)
        done = fab("stop", "--host", "w1", "--inventory", str(inv))
        time.sleep(0.5)
    assert done.returncode == 0, done.stderr
    assert "drained" in done.stdout or "drained" in done.stderr, done.stdout
    assert load.tally.summary()["failed"] == 0, load.tally.summary()
    assert f"http://127.0.0.1:{_port(inv, 'w1')}" not in real_router.workers()


def test_a_rolling_restart_never_takes_out_the_last_healthy_worker(
    fleet: Callable[[list[str]], Path], real_router: RealRouter
) -> None:
    inv = fleet(["solo"])
    assert fab("deploy", "--host", "solo", "--inventory", str(inv)).returncode == 0
    before = runs_of_one(inv, "solo")
    done = fab("restart", "--rolling", "--host", "solo", "--inventory", str(inv), "--plain")
    assert done.returncode != 0
    assert "would leave no worker serving" in done.stderr, done.stderr
    assert runs_of_one(inv, "solo") == before
    assert len(real_router.workers()) == 1


def runs_of_one(inv: Path, name: str) -> str:
    done = fab("status", "--host", name, "--inventory", str(inv), "--json")
    return str(json.loads(done.stdout)["hosts"][0]["run_id"])


def _port(inv: Path, name: str) -> int:
    import yaml

    return int(yaml.safe_load(inv.read_text())["deployments"][name]["port"])


def test_start_then_wait_hands_the_worker_over_only_once_wait_saw_it_ready(
    fleet: Callable[[list[str]], Path], real_router: RealRouter
) -> None:
    inv = fleet(["solo"])
    started = fab("start", "--host", "solo", "--inventory", str(inv))
    assert started.returncode == 0, started.stderr
    assert real_router.workers() == {}  # started is not ready: the router is not told
    waited = fab("wait", "--host", "solo", "--inventory", str(inv), "--plain")
    assert waited.returncode == 0, waited.stderr
    assert "router: joined" in waited.stderr
    assert list(real_router.workers().values()) == [True]
