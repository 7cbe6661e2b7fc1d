"""Deploys that meet on one node: at the same moment (the node's lock decides, the others are
refused naming the owner), and one after another (a running server is never replaced without
--restart, and a restart keeps the old run's log)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from firedup.errors import LockedError
from tests.conftest import FAB, REPO
from tests.reliability import tally
from tests.reliability.helpers import Host, Outcome, leftover_problems, told_state_problems

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]


def test_three_deploys_at_once_through_the_core(make_host: Callable[..., Host]) -> None:
    host = make_host()
    data, before = host.data(), set(host.runs())
    barrier = threading.Barrier(3)

    def deploy(_i: int) -> Outcome:
        node = host.node()
        barrier.wait()
        return host.deploy(node)

    with ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(deploy, range(3)))
    tally.fault("concurrent deploys", 3)
    ready = [o for o in outcomes if o.ready]
    refused = [o for o in outcomes if isinstance(o.error, LockedError)]
    assert len(ready) == 1 and len(refused) == 2, [o.message[:200] for o in outcomes]
    assert all("is locked" in o.message and "deploy by" in o.message for o in refused)
    assert len(host.runs()) == len(before) + 1  # the refused ones started nothing
    assert not told_state_problems(host, ready[0], before)
    assert not data.lost_in(host.data())
    assert not leftover_problems(host)


def test_two_fab_deploys_at_once(make_host: Callable[..., Host]) -> None:
    host = make_host()
    argv = [FAB, "deploy", "--host", "n", "--inventory", str(host.inventory_path)]
    procs = [
        subprocess.Popen(
            argv,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    results = [(p.wait(90), *p.communicate()) for p in procs]
    tally.fault("concurrent fab deploys", 2)
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, LockedError.exit_code], results
    refused = next(err for code, _out, err in results if code == LockedError.exit_code)
    assert "Traceback" not in refused and "is locked" in refused, refused
    assert len(host.live_runs()) == 1
    assert not leftover_problems(host)


def test_one_after_another(make_host: Callable[..., Host]) -> None:
    host = make_host()
    first = host.deploy()
    assert first.ready, first.message
    old = host.live_runs()
    data = host.data()
    again = host.cli("deploy")  # without --restart: refused, the running server untouched
    tally.bad_input("deploy over a running server")
    assert again.returncode != 0 and "Traceback" not in again.stderr, again.stderr
    assert "--restart" in again.stderr, again.stderr
    assert host.live_runs() == old
    restart = host.cli("deploy", "--restart")
    assert restart.returncode == 0, restart.stderr
    live = host.live_runs()
    assert len(live) == 1 and set(live) != set(old)
    assert not data.lost_in(host.data())  # the replaced run's log is still there
    assert not leftover_problems(host)
