"""Hangs: a server that goes silent, a rank that dies without a word, and a frozen link. Each
wait ends by its deadline with what is known, and the server is where the user was told."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from firedup.errors import NotReadyError
from firedup.readiness.wait import WaitHooks
from firedup.readiness.watch import WaitStatus
from tests.reliability import tally
from tests.reliability.helpers import (
    Host,
    Outcome,
    freeze_connections,
    kill_connections,
    leftover_problems,
    thaw,
    told_state_problems,
)

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]


HANGS = [("nccl_hang", "", "init_distributed"), ("rank_killed", "0.5.9", "loading_weights")]


def hang_problems(host: Host, fault: str, phase: str) -> list[str]:
    before = set(host.runs())
    started = time.monotonic()
    outcome = host.deploy(timeout_s=2)
    tally.fault(f"silent hang ({fault})")
    took, message = time.monotonic() - started, outcome.message
    if not isinstance(outcome.error, NotReadyError):
        return [f"{fault}: expected not-ready, got {message[:200]}"]
    problems = [f"{fault}: {p}" for p in told_state_problems(host, outcome, before)]
    if took > 15:
        problems.append(f"{fault}: a 2 s wait took {took:.0f} s")
    if f"stuck in phase {phase}" not in message or "still running" not in message:
        problems.append(f"{fault}: the report lacks the phase or 'still running': {message}")
    if len(host.live_runs()) != 1:  # told "still running": it must be
        problems.append(f"{fault}: {len(host.live_runs())} servers run, told one")
    problems += [f"{fault}: {p}" for p in leftover_problems(host)]
    stop = host.cli("stop", "--grace", "2")
    if stop.returncode != 0 or host.live_runs():
        problems.append(f"{fault}: fab stop did not end it: {stop.stderr}")
    problems += [f"{fault}: {p}" for p in leftover_problems(host, allowed_sids=set())]
    return problems


def test_a_silent_server_ends_not_ready_and_keeps_running(make_host: Callable[..., Host]) -> None:
    hosts = []
    for fault, version, _phase in HANGS:
        env = {"FIREDUP_SIM_FAULT": fault, "FIREDUP_SIM_SPEED": "4"}
        if version:
            env["FIREDUP_SIM_SGLANG_VERSION"] = version
        hosts.append(make_host({"tp": 2}, **env))
    with ThreadPoolExecutor(len(HANGS)) as pool:
        found = pool.map(hang_problems, hosts, [h[0] for h in HANGS], [h[2] for h in HANGS])
        problems = [p for part in found for p in part]
    assert not problems, "\n".join(problems)


def test_a_frozen_link_does_not_hold_the_wait_past_its_deadline(
    make_host: Callable[..., Host],
) -> None:
    """The peer stops answering mid-wait (its sshd processes are SIGSTOPped)."""
    host = make_host(FIREDUP_SIM_FAULT="nccl_hang", FIREDUP_SIM_SPEED="4")
    frozen: list[int] = []

    def freeze(status: WaitStatus) -> None:
        if not frozen and status.elapsed_s > 0.3:
            frozen.extend(freeze_connections(host.sshd))

    result: list[Outcome] = []
    hooks = WaitHooks(on_status=freeze)
    waiter = threading.Thread(target=lambda: result.append(host.deploy(timeout_s=2, hooks=hooks)))
    started = time.monotonic()
    waiter.start()
    waiter.join(6)
    took = time.monotonic() - started
    thaw(frozen)  # then drop: whatever still waits on the link gets its answer now
    kill_connections(host.sshd)
    waiter.join(60)
    assert frozen, "the link was never frozen"
    assert result and not result[0].ready, result
    assert took < 6, f"the wait with a 2 s deadline was still running after {took:.0f} s"
    assert len(host.live_runs()) == 1  # a frozen link never touches the server


def test_a_suspended_server_is_stopped_by_term_not_by_waiting_out_the_grace(
    make_host: Callable[..., Host],
) -> None:
    """A server whose processes are suspended (SIGSTOP, a Ctrl-Z in the node's terminal, a
    debugger's pause) cannot act on a TERM until it runs again: stop sends CONT after TERM, as
    systemd does, so it ends cleanly at once instead of being KILLed after the grace period."""
    import os
    import signal

    from tests.conftest import session_members

    host = make_host()
    deployed = host.cli("deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    (pid,) = (p for p in host.runs().values() if p)
    os.killpg(pid, signal.SIGSTOP)
    started = time.monotonic()
    stopped = host.cli("stop", "--grace", "30")
    took = time.monotonic() - started
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 0, output
    assert "KILL" not in output, output
    assert session_members(pid) == [], output
    assert took < 15, f"stop took {took:.1f}s of its 30s grace: the TERM waited for a CONT"
