"""End to end over a real sshd: deploy -> ready -> status -> stop, against the simulated node."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import (
    Sshd,
    fab,
    session_members,
    sim_deployment,
    ssh_host,
    stop_runs,
    wait_until,
)

pytestmark = pytest.mark.ssh


def health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def current_meta(workdir: Path) -> dict[str, object]:
    return json.loads((workdir / "current" / "meta.json").read_text())


@pytest.fixture
def node_inventory(sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Path:
    workdir = tmp_path / "node"
    inv = write_inventory(
        {"node": ssh_host(sshd, workdir, "tiny")},
        {"tiny": sim_deployment(tp=2, ready_timeout_s=60)},
    )
    yield inv
    stop_runs(inv)


def test_deploy_ready_status_stop(node_inventory: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "node"
    result = fab("deploy", "--host", "node", "--inventory", str(node_inventory))
    assert result.returncode == 0, result.stderr
    assert "node: READY" in result.stdout
    assert "Traceback" not in result.stderr

    # The deploy command has exited; the server is still there, in its own session.
    meta = current_meta(workdir)
    pid, port = int((workdir / "current" / "pid").read_text()), int(meta["port"])
    assert pid in session_members(pid)
    assert len(session_members(pid)) >= 3  # the server and its two TP rank processes
    assert health(port) == 200
    assert (workdir / "current" / "launch.sh").read_text().startswith("#!/usr/bin/env bash")

    status = fab("status", "--host", "node", "--inventory", str(node_inventory))
    assert status.returncode == 0, status.stderr
    assert "ready" in status.stdout and str(meta["run_id"]) in status.stdout

    # Starting again while it runs is refused; nothing new is started.
    again = fab("start", "--host", "node", "--inventory", str(node_inventory))
    assert again.returncode == 7 and "still running" in again.stderr
    assert current_meta(workdir)["run_id"] == meta["run_id"]

    stop = fab("stop", "--host", "node", "--inventory", str(node_inventory))
    assert stop.returncode == 0, stop.stderr
    assert "stopped" in stop.stdout
    assert session_members(pid) == []
    wait_until(lambda: port_free(port), 5, "port to be released")

    after = fab("status", "--host", "node", "--inventory", str(node_inventory))
    # `fab stop` ended it, and the history says so: stopped, not "exited" (issue 16 §10).
    assert "stopped" in after.stdout and "exited" not in after.stdout


def test_restart_replaces_the_running_server(node_inventory: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "node"
    assert fab("deploy", "--host", "node", "--inventory", str(node_inventory)).returncode == 0
    first = int((workdir / "current" / "pid").read_text())
    result = fab("deploy", "--host", "node", "--inventory", str(node_inventory), "--restart")
    assert result.returncode == 0, result.stderr
    second = int((workdir / "current" / "pid").read_text())
    assert first != second
    assert session_members(first) == [] and second in session_members(second)
    assert len(list((workdir / "runs").iterdir())) == 2  # the old run's files are kept


def test_logs_shows_the_current_run(node_inventory: Path) -> None:
    assert fab("deploy", "--host", "node", "--inventory", str(node_inventory)).returncode == 0
    logs = fab("logs", "--host", "node", "--inventory", str(node_inventory), "--lines", "5")
    assert logs.returncode == 0
    assert "fired up and ready to roll" in logs.stdout


def test_unknown_host_key_is_refused(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inv = write_inventory(
        {"node": ssh_host(sshd, tmp_path / "w", "tiny", known_hosts=str(empty))},
        {"tiny": sim_deployment()},
    )
    result = fab("status", "--host", "node", "--inventory", str(inv))
    assert result.returncode != 0
    assert "host key unknown" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert empty.read_text() == ""  # nothing was trusted behind our back
    assert not (tmp_path / "w").exists()


def test_accept_new_trusts_once_then_refuses_a_changed_key(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    known = tmp_path / "kh" / "known_hosts"
    inv = write_inventory(
        {
            "node": ssh_host(
                sshd, tmp_path / "w", "tiny", known_hosts=str(known), host_key_policy="accept-new"
            )
        },
        {"tiny": sim_deployment()},
    )
    first = fab("status", "--host", "node", "--inventory", str(inv))
    assert first.returncode == 0, first.stderr
    assert sshd.host_pub.split()[1] in known.read_text()

    # Replace the recorded key with another valid key: the node now looks like an impostor.
    other = Path(sshd.client_key.with_suffix(".pub")).read_text().split()
    known.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    second = fab("status", "--host", "node", "--inventory", str(inv))
    assert second.returncode == 3
    assert "host key CHANGED" in second.stdout + second.stderr


def test_cli_usage_errors_are_one_line() -> None:
    result = fab("deploy", "--host", "nope")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "unknown host 'nope'" in result.stderr and "demo" in result.stderr
    assert "Traceback" not in result.stderr
    missing = fab("deploy")
    assert missing.returncode == 2 and "--host NAME is required" in missing.stderr


def test_fab_lists_every_task_with_a_description() -> None:
    listing = fab("--list").stdout
    for name in ("deploy", "status", "stop", "render", "start", "wait", "logs"):
        line = next((ln for ln in listing.splitlines() if ln.strip().startswith(name + " ")), "")
        assert line.split(maxsplit=1)[1:], f"{name} has no description in fab --list"
    help_text = fab("--help", "deploy").stdout
    for option in ("--host", "--inventory", "--restart", "--timeout", "--poll"):
        assert option in help_text
