"""Issue 16 §7 and §10: what the user is told matches what happened, and a failure seen only
by `fab wait` is recorded, so the next deploy's pruning keeps that run's log."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import FAB, NODE_PYTHON, REPO, wait_until
from tests.reliability.helpers import Host

pytestmark = [pytest.mark.ssh]


def test_a_crash_seen_only_by_wait_is_recorded_and_its_log_kept(
    make_host: Callable[..., Host],
) -> None:
    crashing = make_host(FIREDUP_SIM_FAULT="oom_load")
    spec = crashing.inventory_path.read_text().replace("keep_runs: 1000", "keep_runs: 1")
    crashing.inventory_path.write_text(spec)
    started = crashing.cli("start")
    assert started.returncode == 0, started.stdout + started.stderr
    (crashed,) = crashing.runs()
    waited = crashing.cli("wait", "--timeout", "30")
    assert waited.returncode == 8, waited.stdout + waited.stderr
    records = [r for r in crashing.history() if r["run_id"] == crashed]
    assert [(r["action"], r["outcome"]) for r in records][-1] == ("wait", "failed"), records
    # A healthy deploy on the same node (keep_runs: 1) prunes, but not the crashed run.
    healthy = Host.create(crashing.sshd, crashing.root / "ok", None, {}, crashing.workdir)
    healthy.inventory_path.write_text(
        healthy.inventory_path.read_text().replace("keep_runs: 1000", "keep_runs: 1")
    )
    try:
        deployed = healthy.cli("deploy")
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        assert (crashing.workdir / "runs" / crashed / "server.log").exists()
    finally:
        healthy.cleanup()


def test_status_and_wait_after_a_stop_say_stopped(make_host: Callable[..., Host]) -> None:
    host = make_host()
    assert host.cli("deploy").returncode == 0
    assert host.cli("stop").returncode == 0
    status = host.cli("status", "--json")
    (entry,) = json.loads(status.stdout)["hosts"]
    assert entry["state"] == "stopped", status.stdout
    last = host.cli("history", "--lines", "1")  # a good value still works
    assert last.returncode == 0 and len(last.stdout.splitlines()) == 2, last.stdout
    waited = host.cli("wait", "--timeout", "10")
    output = waited.stdout + waited.stderr
    assert waited.returncode == 1, output
    assert "was stopped by" in output and "exited without a known error" not in output, output


def test_a_deploy_over_our_running_server_is_a_refused_start(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    assert host.cli("deploy").returncode == 0
    live = host.live_runs()
    again = host.cli("deploy")
    assert again.returncode == 7, again.stdout + again.stderr  # StartError, docs/exit-codes.md
    assert "still running" in again.stderr and "--restart" in again.stderr, again.stderr
    assert host.live_runs() == live


def test_ctrl_c_during_preflight_says_nothing_was_started(
    make_host: Callable[..., Host], tmp_path: Path
) -> None:
    """The tool knows it had not started anything: it says so, not "during the launch".
    (invoke lets the node command that is running finish first: the preflight's python sleeps
    a few seconds, not more.)"""
    marker = tmp_path / "in-preflight"
    wrapper = tmp_path / "slow-python"
    wrapper.write_text(
        "#!/bin/sh\n"
        # preflight runs `python -c SNIPPET`; the launch is `python -m sglang.launch_server`.
        f'[ "$1" != -c ] || {{ : > {marker}; sleep 4; }}\n'
        f'exec {NODE_PYTHON} "$@"\n'
    )
    wrapper.chmod(0o755)
    host = make_host()
    host.inventory_path.write_text(
        host.inventory_path.read_text().replace(NODE_PYTHON, str(wrapper))
    )
    argv = [FAB, "deploy", "--host", "n", "--inventory", str(host.inventory_path)]
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(marker.exists, 30, "preflight to reach the node's python")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert "no server was started" in err and "during the launch" not in err, err
    assert not host.live_runs()


def test_stop_from_another_terminal_ends_a_deploy_that_only_waits(
    make_host: Callable[..., Host],
) -> None:
    """A deploy waiting for a slow start holds the lock; `fab stop` elsewhere takes it over
    (the wait changes nothing), stops the server, and the deploy says who stopped it."""
    host = make_host(FIREDUP_SIM_SPEED="0.05")  # tiny-llama: ~30 s to ready
    argv = [FAB, "deploy", "--host", "n", "--inventory", str(host.inventory_path)]
    deploy = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: (host.workdir / "lock.waiting").exists(), 30, "the deploy to wait")
        stopped = host.cli("stop", "--grace", "2")
        out, err = deploy.communicate(timeout=60)
    finally:
        if deploy.poll() is None:
            deploy.kill()
            deploy.wait()
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopped" in stopped.stdout and "it only waits" in stopped.stderr, stopped.stderr
    assert not host.live_runs()
    assert deploy.returncode == 1, out + err
    assert "was stopped by" in err and "while this wait was on" in err, err
    assert "exited without a known error" not in err, err
    assert "dropped connection" not in err, err
    assert "the lock was taken over while this operation ran" in err, err  # and why it ended
    outcomes = [(r["action"], r["outcome"]) for r in host.history()]
    assert outcomes[-2:] in (
        [("stop", "stopped"), ("deploy", "stopped")],
        [("deploy", "stopped"), ("stop", "stopped")],
    ), outcomes


def test_logs_follow_ends_130_on_ctrl_c_and_progress_lines_say_real_times(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    deployed = host.cli("deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    # Off a terminal one line per change: the time in a phase just entered is always 0s.
    changes = [ln for ln in deployed.stderr.splitlines() if "alive=" in ln]
    assert changes and not [ln for ln in changes if "0s in phase" in ln], deployed.stderr
    argv = [FAB, "logs", "--follow", "--host", "n", "--inventory", str(host.inventory_path)]
    follow = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert follow.stdout is not None
        follow.stdout.readline()  # it is following
        follow.send_signal(signal.SIGINT)
        _out, err = follow.communicate(timeout=30)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 130, err  # as docs/exit-codes.md says
    assert "Traceback" not in err, err


@pytest.mark.parametrize("task", ["deploy", "restart", "stop"])
def test_force_unlock_has_no_short_flag(task: str) -> None:
    """It was -o on deploy (where -f is --follow) and -f on stop."""
    shown = subprocess.run([FAB, "--help", task], cwd=REPO, capture_output=True, text=True)
    line = next(ln for ln in shown.stdout.splitlines() if "--force-unlock" in ln)
    assert line.split()[0] == "--force-unlock", line


def test_a_deploy_killed_after_the_start_leaves_its_record(
    make_host: Callable[..., Host],
) -> None:
    """Issue 28 §5: kill -9 of `fab deploy` while it waits: the run it started is in the
    node's history (as started), not missing from it."""
    host = make_host(FIREDUP_SIM_SPEED="0.5")  # a start-up that lasts seconds
    before = set(host.runs())
    deploy = subprocess.Popen(
        host.cli_argv("deploy"), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        started = wait_until(
            lambda: [r for r, pid in host.runs().items() if r not in before and pid], 30, "a start"
        )
        (run_id,) = started
        wait_until(lambda: (host.workdir / "lock.waiting").exists(), 30, "the deploy to wait")
    finally:
        deploy.send_signal(signal.SIGKILL)
        deploy.wait()
    records = [(r["action"], r["outcome"]) for r in host.history() if r["run_id"] == run_id]
    assert records == [("deploy", "started")], records
    status = host.cli("status", "--json")
    (entry,) = json.loads(status.stdout)["hosts"]
    assert entry["last_deploy"]["outcome"] == "started", status.stdout
