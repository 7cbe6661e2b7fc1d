"""Day-2 operations over a real sshd (issue 7): the lock, fleets, status --json, stop."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import (
    FAB,
    REPO,
    Sshd,
    fab,
    free_port,
    session_members,
    sim_deployment,
    ssh_host,
    stop_runs,
    wait_until,
)

pytestmark = pytest.mark.ssh
SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())


def test_two_deploys_at_once_one_is_refused_naming_the_other(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    workdir = tmp_path / "node"
    host = ssh_host(sshd, workdir, "d")
    host["env"] = {**host["env"], "FIREDUP_SIM_SPEED": "0.3"}  # a deploy that takes a while
    inv = write_inventory({"n": host}, {"d": sim_deployment(tp=2)})
    first = subprocess.Popen(
        [FAB, "deploy", "--host", "n", "--inventory", str(inv)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: (workdir / "current").exists(), 60, "the first deploy to start")
        second = fab("deploy", "--host", "n", "--inventory", str(inv), "--restart")
        assert second.returncode == 11, second.stderr
        assert "deploy by" in second.stderr and "lock" in second.stderr
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        assert "n: READY" in out
        assert len(list((workdir / "runs").iterdir())) == 1  # the refused one launched nothing
    finally:
        if first.poll() is None:
            first.kill()
        stop_runs(inv)


def test_a_fleet_where_one_host_fails(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    names = ["a", "b", "c", "d"]
    hosts = {n: ssh_host(sshd, tmp_path / n, n) for n in names}
    deployments = {n: sim_deployment() for n in names}
    hosts["c"]["env"] = {**hosts["c"]["env"], "FIREDUP_SIM_FAULT": "oom_load"}
    inv = write_inventory(hosts, deployments, groups={"fleet": names})
    try:
        result = fab("deploy", "--host", "fleet", "--inventory", str(inv), timeout_s=180)
        assert result.returncode == 8, result.stdout + result.stderr
        rows = {ln.split()[0]: ln for ln in result.stdout.splitlines()[1:] if ln.strip()}
        assert set(rows) == set(names)
        assert all("READY" in rows[n] for n in ("a", "b", "d"))
        assert "FAILED" in rows["c"] and "oom" in rows["c"]
        assert "1 of 4 hosts failed: c" in result.stderr
        for n in ("a", "b", "d"):
            pid = int((tmp_path / n / "current" / "pid").read_text())
            assert pid in session_members(pid)
        status = fab("status", "--host", "a,b,c,d", "--inventory", str(inv), "--json")
        states = {h["host"]: h["state"] for h in json.loads(status.stdout)["hosts"]}
        assert states == {"a": "ready", "b": "ready", "c": "failed", "d": "ready"}
    finally:
        stop = fab("stop", "--host", "fleet", "--inventory", str(inv), "--grace", "2")
    assert stop.returncode == 0, stop.stderr
    for n in ("a", "b", "d"):
        assert f"{n}: run" in stop.stdout and "stopped" in stop.stdout
        pid = int((tmp_path / n / "current" / "pid").read_text())
        assert session_members(pid) == []


def test_status_json_validates_against_the_documented_schema(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    hosts = {
        "up": ssh_host(sshd, tmp_path / "up", "spec"),
        "fresh": ssh_host(sshd, tmp_path / "fresh", "tiny"),
        "down": {
            **ssh_host(sshd, tmp_path / "down", "tiny"),
            "port": free_port(),
            "connect_timeout_s": 2,
        },
    }
    deployments = {
        "tiny": sim_deployment(),
        "spec": sim_deployment(
            model=str(REPO / "sim" / "models" / "kimi-k25"),
            tp=8,
            context_length=131072,
            speculative={
                "algorithm": "EAGLE3",
                "num_steps": 3,
                "draft_model": str(REPO / "sim" / "models" / "kimi-k25-eagle3"),
            },
            patches=[],
        ),
    }
    inv = write_inventory(hosts, deployments)
    try:
        # Kimi + EAGLE-3 unpatched fails preflight; launch it on 0.5.10, where it needs no patch.
        hosts["up"]["env"] = {**hosts["up"]["env"], "FIREDUP_SIM_SGLANG_VERSION": "0.5.10"}
        inv = write_inventory(hosts, deployments)
        assert fab("deploy", "--host", "up", "--inventory", str(inv)).returncode == 0
        smoke = fab("smoke", "--host", "up", "--inventory", str(inv))
        assert smoke.returncode == 0, smoke.stderr
        result = fab("status", "--inventory", str(inv), "--json")
        assert result.returncode == 3  # one host is down, and says so
        data = json.loads(result.stdout)
        jsonschema.validate(data, SCHEMA)
        by_host = {h["host"]: h for h in data["hosts"]}
        assert by_host["up"]["state"] == "ready" and by_host["up"]["signals"]["health"] == 200
        assert by_host["up"]["engine_version"] == "0.5.10"
        assert by_host["up"]["last_deploy"]["outcome"] == "ready"
        assert len(by_host["up"]["gpus"]) == 8
        assert by_host["fresh"]["state"] == "never-deployed"
        assert by_host["down"]["reachable"] is False and by_host["down"]["error"]
    finally:
        stop_runs(inv, "up")
