"""History on the node and run pruning, over a real sshd (issue 7 §3)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from invoke import Context

from firedup.config.inventory import HostSpec, Inventory, parse_inventory
from firedup.engine import Engine
from firedup.errors import CommandResult, ServerCrashedError
from firedup.launch.runs import RunMeta
from firedup.node.lock import node_lock
from firedup.node.ssh import LocalNode, SshNode
from firedup.ops.deploy import plan_deploy, stopped_during_wait
from firedup.ops.history import (
    Action,
    HistoryRecord,
    Outcome,
    append_history,
    mask_env,
    prune_runs,
    read_history,
    run_record,
)
from tasks.history import history as history_task
from tests.conftest import Sshd, ssh_host

pytestmark = pytest.mark.ssh


@pytest.fixture
def inventory(sshd: Sshd, tmp_path: Path) -> Inventory:
    return parse_inventory(
        {
            "hosts": {
                "n": ssh_host(sshd, tmp_path / "node", "d"),
                "local": {
                    "transport": "local",
                    "workdir": str(tmp_path / "node"),
                    "deployment": "d",
                },
            },
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        tmp_path / "hosts.yaml",
    )


@pytest.fixture
def spec(inventory: Inventory) -> HostSpec:
    return inventory.host("n")


@pytest.fixture
def node(spec: HostSpec) -> Iterator[SshNode]:
    node = SshNode(spec)
    yield node
    node.close()


def record(run_id: str, outcome: Outcome = Outcome.READY, **kw: object) -> HistoryRecord:
    base: dict[str, object] = {
        "action": Action.DEPLOY,
        "outcome": outcome,
        "host": "n",
        "who": "alice@laptop",
        "at": datetime.now(UTC).replace(microsecond=0),  # the file keeps milliseconds
        "run_id": run_id,
    }
    return HistoryRecord(**{**base, **kw})  # type: ignore[arg-type]


def test_append_then_read_over_ssh(node: SshNode, spec: HostSpec, tmp_path: Path) -> None:
    assert read_history(node, spec) == []  # nothing recorded yet: no error
    first = record("r1", env=mask_env({"HF_TOKEN": "hf_x", "A": "1"}), reason='it\'s "ok" $HOME')
    append_history(node, spec, first)
    append_history(node, spec, record("r1", Outcome.STOPPED, action=Action.STOP))
    got = read_history(node, spec)
    assert [(r.action, r.outcome) for r in got] == [
        (Action.DEPLOY, Outcome.READY),
        (Action.STOP, Outcome.STOPPED),
    ]
    assert got[0] == first and got[0].reason == 'it\'s "ok" $HOME'
    text = (tmp_path / "node" / "history.jsonl").read_text()
    assert "hf_x" not in text and text.count("\n") == 2
    assert [r.run_id for r in read_history(node, spec, limit=1)] == ["r1"]
    assert read_history(node, spec, limit=1)[0].action is Action.STOP


def test_concurrent_appends_never_interleave(inventory: Inventory, tmp_path: Path) -> None:
    """Eight operators append at once (four over SSH, four local): every line stays whole."""
    specs = [inventory.host("n")] * 4 + [inventory.host("local")] * 4
    long_reason = "x" * 6000  # longer than a stdio buffer, so a split write would show

    def write(i: int, spec: HostSpec) -> None:
        node = SshNode(spec) if spec.transport == "ssh" else LocalNode(spec.name)
        try:
            for j in range(3):
                append_history(node, spec, record(f"r{i}-{j}", reason=long_reason))
        finally:
            node.close()

    threads = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(specs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    lines = (tmp_path / "node" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 24
    ids = sorted(json.loads(line)["run_id"] for line in lines)  # each line parses on its own
    assert ids == sorted(f"r{i}-{j}" for i in range(8) for j in range(3))


def test_a_torn_last_line_is_skipped_and_does_not_swallow_the_next(
    node: SshNode, spec: HostSpec, tmp_path: Path
) -> None:
    append_history(node, spec, record("r1"))
    path = tmp_path / "node" / "history.jsonl"
    with path.open("a") as fh:
        fh.write(record("torn").to_line()[:40])  # a crash mid-write: no newline
    assert [r.run_id for r in read_history(node, spec)] == ["r1"]
    append_history(node, spec, record("r2"))
    assert [r.run_id for r in read_history(node, spec)] == ["r1", "r2"]
    assert [r.run_id for r in read_history(node, spec, limit=1)] == ["r2"]


RUNS = [f"20260222T10{m:02d}00Z-aaaaa{m}" for m in range(7)]  # oldest first


def make_runs(workdir: Path, current: str) -> None:
    for run_id in RUNS:
        rundir = workdir / "runs" / run_id
        rundir.mkdir(parents=True)
        (rundir / "server.log").write_text(f"log of {run_id}\n")
    (workdir / "runs" / "stray-file").write_text("not a run dir")
    (workdir / "current").symlink_to(f"runs/{current}")


def test_prune_keeps_exactly_the_newest_the_current_and_the_last_failed(
    node: SshNode, spec: HostSpec, tmp_path: Path
) -> None:
    workdir = tmp_path / "node"
    make_runs(workdir, current=RUNS[3])  # e.g. a rollback made an older run current
    for run_id, outcome in [(RUNS[0], Outcome.FAILED), (RUNS[2], Outcome.NOT_READY)]:
        append_history(node, spec, record(run_id, outcome))
    append_history(node, spec, record(RUNS[6], Outcome.READY))
    report = prune_runs(node, spec, keep_runs=2)
    left = sorted(p.name for p in (workdir / "runs").iterdir())
    assert left == sorted([RUNS[2], RUNS[3], RUNS[5], RUNS[6], "stray-file"])
    assert sorted(report.removed) == sorted([RUNS[0], RUNS[1], RUNS[4]])
    assert sorted(report.kept) == sorted([RUNS[2], RUNS[3], RUNS[5], RUNS[6]])
    assert report.refused == {}
    again = prune_runs(node, spec, keep_runs=2)  # idempotent
    assert again.removed == () and sorted(p.name for p in (workdir / "runs").iterdir()) == left


def test_the_node_refuses_to_prune_a_run_that_is_still_alive(
    node: SshNode, spec: HostSpec, tmp_path: Path
) -> None:
    workdir = tmp_path / "node"
    make_runs(workdir, current=RUNS[6])
    survivor = subprocess.Popen(["sleep", "60"], start_new_session=True)  # sid == its pid
    try:
        (workdir / "runs" / RUNS[1] / "pid").write_text(f"{survivor.pid}\n")
        report = prune_runs(node, spec, keep_runs=1)
        assert report.refused == {RUNS[1]: "alive"}
        assert sorted(report.removed) == sorted(set(RUNS) - {RUNS[1], RUNS[6]})
        assert sorted(p.name for p in (workdir / "runs").iterdir() if p.is_dir()) == sorted(
            [RUNS[1], RUNS[6]]
        )
        assert survivor.poll() is None
    finally:
        survivor.kill()
        survivor.wait()


def test_fab_history_prints_a_table_and_json(
    node: SshNode, spec: HostSpec, inventory: Inventory, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = str(inventory.path)
    Path(inv).write_text(json.dumps(_raw(inventory)))
    history_task(Context(), host="n", inventory=inv)
    assert "n: no history yet" in capsys.readouterr().out
    append_history(
        node,
        spec,
        record(
            RUNS[0],
            Outcome.FAILED,
            reason="missing_model_hook: no attribute 'set_eagle3_layers_to_capture'",
            engine="sglang",
            engine_version="0.5.9",
            repo_commit="0123456789abcdef0123456789abcdef01234567+dirty",
            script_sha256="e" * 64,
        ),
    )
    append_history(node, spec, record(RUNS[0], Outcome.STOPPED, action=Action.STOP))
    history_task(Context(), host="n", inventory=inv)
    out = capsys.readouterr().out.splitlines()
    headers = "WHEN (UTC) ACTION RUN OUTCOME WHO ENGINE COMMIT SCRIPT REASON"
    assert out[0].split() == headers.split()
    assert "deploy" in out[1] and "failed" in out[1] and "sglang 0.5.9" in out[1]
    assert "0123456789ab+dirty" in out[1] and "eeeeeeeeeeee" in out[1]
    assert "missing_model_hook" in out[1] and "stop" in out[2] and "stopped" in out[2]
    history_task(Context(), host="n", inventory=inv, lines=1, json_=True)
    data = json.loads(capsys.readouterr().out)
    assert [(d["action"], d["outcome"]) for d in data] == [("stop", "stopped")]


def _raw(inventory: Inventory) -> dict[str, object]:
    """The inventory back as plain data, to write it to a file the task can load."""
    return {
        "hosts": {
            n: {
                k: str(v) if isinstance(v, Path) else v
                for k, v in h.model_dump(mode="json").items()
            }
            for n, h in inventory.hosts.items()
        },
        "deployments": {n: d.model_dump(mode="json") for n, d in inventory.deployments.items()},
    }


def test_local_node_prunes_too(tmp_path: Path, inventory: Inventory) -> None:
    spec = inventory.host("local")
    make_runs(tmp_path / "node", current=RUNS[0])
    report = prune_runs(LocalNode("local"), spec, keep_runs=3)
    assert sorted(report.kept) == sorted([RUNS[0], RUNS[4], RUNS[5], RUNS[6]])
    assert not (tmp_path / "node" / "runs" / RUNS[1]).exists()
    assert os.path.islink(tmp_path / "node" / "current")


class _StopEndsAfterFirstRead(LocalNode):
    """A node on which another terminal's `fab stop` ends right after the first command
    this process runs: it writes its history line, then lets the lock go."""

    def __init__(self, finish: Callable[[], None]) -> None:
        super().__init__("local")
        self.finish: Callable[[], None] | None = finish

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        result = super().run(argv, **kw)
        finish, self.finish = self.finish, None
        if finish is not None:
            finish()
        return result


def test_a_stop_that_ends_between_the_deploys_two_reads_is_still_named(tmp_path: Path) -> None:
    """Found in CI: the waiting deploy read the history (no stop line yet), the stop then wrote
    its line and let the lock go, and the deploy read a free lock: "server exited without a
    known error" (exit 8) instead of "stopped by ... (`fab stop`)" (exit 1)."""
    inv = parse_inventory(
        {
            "hosts": {
                "n": {"transport": "local", "workdir": str(tmp_path / "w"), "deployment": "d"}
            },
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        tmp_path / "hosts.yaml",
    )
    host = inv.host("n")
    plan = plan_deploy(host, inv.deployments["d"])
    run = RunMeta(
        run_id=plan.run_id,
        host="n",
        deployment="d",
        engine=Engine.SGLANG,
        workdir=host.workdir,
        port=8000,
        script_sha256="0" * 64,
        started_at=0.0,
        started_by="alice@laptop",
        pid=4242,
    )
    plain = LocalNode("local")
    with ExitStack() as stop:
        stop.enter_context(node_lock(plain, host, "stop"))

        def finish() -> None:
            append_history(plain, host, run_record(Action.STOP, Outcome.STOPPED, run))
            stop.close()

        node = _StopEndsAfterFirstRead(finish)
        told = stopped_during_wait(node, plan, run, ServerCrashedError("n: server exited"))
    assert told is not None and "(`fab stop`)" in str(told), told
