"""History records, masking and the prune plan: pure, on values."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firedup import __version__
from firedup.config.inventory import load_inventory
from firedup.engine import Engine
from firedup.errors import NotReadyError, ServerCrashedError, WaitInterrupted
from firedup.launch.runs import RunMeta
from firedup.logscan import explain
from firedup.node.base import operator
from firedup.ops.history import (
    MASK,
    MAX_LINE_BYTES,
    Action,
    HistoryRecord,
    Outcome,
    PhaseTiming,
    last_failed_run,
    last_start,
    mask_env,
    outcome_of,
    parse_history,
    phase_timings,
    plan_prune,
    run_record,
)
from firedup.ops.repo import inventory_commit, repo_commit

AT = datetime(2026, 2, 22, 10, 30, 0, tzinfo=UTC)


def record(run_id: str = "", outcome: Outcome = Outcome.READY, **kw: object) -> HistoryRecord:
    base: dict[str, object] = {
        "action": Action.DEPLOY,
        "outcome": outcome,
        "host": "gpu-node",
        "who": "alice@laptop",
        "at": AT,
        "run_id": run_id,
    }
    return HistoryRecord(**{**base, **kw})  # type: ignore[arg-type]


def test_a_full_record_round_trips_through_one_json_line() -> None:
    full = record(
        "20260222T103000Z-abc123",
        Outcome.FAILED,
        deployment="kimi",
        reason="missing_model_hook: 'KimiK25ForConditionalGeneration' object has no attribute",
        repo_commit="0123456789abcdef0123456789abcdef01234567+dirty",
        engine="sglang",
        engine_version="0.5.9",
        script_sha256="e" * 64,
        patches=("sglang-0.5.9-kimi-k25-eagle3-hooks",),
        env=mask_env({"HF_TOKEN": "hf_secret", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}),
        phases=(PhaseTiming("loading_weights", 412.5), PhaseTiming("cuda_graph", None)),
        duration_s=655.25,
        detail="rank 0",
    )
    line = full.to_line()
    assert "\n" not in line
    data = json.loads(line)
    assert data["v"] == 1 and data["at"] == "2026-02-22T10:30:00.000+00:00"
    assert data["action"] == "deploy" and data["outcome"] == "failed"
    assert data["env"]["HF_TOKEN"] == MASK and "hf_secret" not in line
    assert HistoryRecord.from_json(data) == full


def test_secrets_are_masked_by_name_and_by_list() -> None:
    env = {"HF_TOKEN": "a", "MY_API_KEY": "b", "DB_PASSWORD": "c", "CUSTOM": "d", "PLAIN": "e"}
    masked = mask_env(env, secret_keys={"CUSTOM"})
    assert masked == {
        "CUSTOM": MASK,
        "DB_PASSWORD": MASK,
        "HF_TOKEN": MASK,
        "MY_API_KEY": MASK,
        "PLAIN": "e",
    }
    assert list(masked) == sorted(masked)  # stable order in the file


def test_reading_skips_torn_and_foreign_lines() -> None:
    good = [record("r1").to_line(), record("r2", Outcome.STOPPED, action=Action.STOP).to_line()]
    future = json.loads(good[0]) | {"outcome": "teleported"}  # a newer firedup's outcome
    data = "\n".join(
        [good[0], "not json", json.dumps(future), "[1, 2]", good[1], good[0][: len(good[0]) // 2]]
    )
    records = parse_history(data.encode())
    assert [r.run_id for r in records] == ["r1", "r2"]
    assert records[1].action is Action.STOP and records[1].outcome is Outcome.STOPPED


@given(st.integers(min_value=0, max_value=400))
def test_any_cut_of_a_line_is_skipped_never_misread(cut: int) -> None:
    line = record("r1", reason="x" * 50).to_line()
    whole = record("r0").to_line()
    parsed = parse_history(f"{whole}\n{line[:cut]}".encode())
    assert parsed[0].run_id == "r0"
    assert len(parsed) == 1 or (cut >= len(line) and parsed[1].run_id == "r1")


def test_a_huge_env_is_dropped_not_allowed_to_break_the_append() -> None:
    big = record("r1", env={f"K{i}": "v" * 100 for i in range(2000)})
    line = big.to_line()
    assert len(line.encode()) < MAX_LINE_BYTES
    assert json.loads(line)["env"] == {"(dropped)": "too large to record"}


def test_phase_timings_come_from_the_log_scan() -> None:
    log = (Path(__file__).parent.parent / "fixtures/logs/sglang").glob("*ready*.log")
    scan = explain(next(iter(sorted(log))).read_bytes(), Engine.SGLANG)
    timings = phase_timings(scan)
    assert [t.phase for t in timings] == [s.phase.value for s in scan.phases]
    assert any(t.duration_s is not None for t in timings)
    assert phase_timings(None) == ()


def test_repo_commit_names_the_checkout_or_says_unknown(tmp_path: Path) -> None:
    assert repo_commit(tmp_path) == "unknown"
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert repo_commit(tmp_path) == sha.strip()
    (tmp_path / "f").write_text("2")
    assert repo_commit(tmp_path) == sha.strip() + "+dirty"


RUNS = [f"20260222T10{m:02d}00Z-aaaaa{m}" for m in range(6)]  # oldest first


def test_prune_keeps_the_newest_the_current_and_the_last_failed() -> None:
    records = [
        record(RUNS[0], Outcome.FAILED),
        record(RUNS[1], Outcome.NOT_READY),  # the last failed start
        record(RUNS[1], Outcome.STOPPED, action=Action.STOP),  # stopped later: still failed
        record(RUNS[4], Outcome.READY),
        record(RUNS[5], Outcome.READY),
    ]
    plan = plan_prune([*reversed(RUNS), "not a run", ".."], RUNS[2], records, keep_runs=2)
    assert set(plan.keep) == {RUNS[5], RUNS[4], RUNS[2], RUNS[1]}
    assert set(plan.remove) == {RUNS[0], RUNS[3]}
    assert plan.protected == {RUNS[2]: "current", RUNS[1]: "last failed"}


def test_prune_edges() -> None:
    assert plan_prune(RUNS, None, [], keep_runs=10).remove == ()
    everything = plan_prune(RUNS, None, [], keep_runs=0)
    assert everything.keep == () and set(everything.remove) == set(RUNS)
    assert plan_prune(RUNS, RUNS[0], [], keep_runs=0).keep == (RUNS[0],)
    with pytest.raises(ValueError, match="keep_runs"):
        plan_prune(RUNS, None, [], keep_runs=-1)
    assert last_failed_run([record("x", Outcome.FAILED), record("y")]) == "x"
    assert last_failed_run([record("", Outcome.FAILED)]) is None


def test_outcome_of_what_the_wait_raised() -> None:
    assert outcome_of(None) == (Outcome.READY, "")
    crashed = ServerCrashedError("gpu-node: the server crashed: oom\n  log: /x")
    assert outcome_of(crashed) == (Outcome.FAILED, "gpu-node: the server crashed: oom")
    assert outcome_of(NotReadyError("gpu-node: not ready after 1800s"))[0] is Outcome.NOT_READY
    assert outcome_of(WaitInterrupted("gpu-node: interrupted"))[0] is Outcome.INTERRUPTED
    assert outcome_of(KeyboardInterrupt()) == (Outcome.INTERRUPTED, "KeyboardInterrupt")


def test_run_record_fills_who_when_commit_and_masks() -> None:
    meta = RunMeta(
        run_id="20260222T103000Z-abc123",
        host="gpu-node",
        deployment="kimi",
        engine=Engine.SGLANG,
        port=30000,
        workdir="/srv/firedup",
        script_sha256="e" * 64,
        started_at=0.0,
        started_by="alice@laptop",
    )
    rec = run_record(
        Action.DEPLOY,
        Outcome.READY,
        meta,
        env={"HF_TOKEN": "x", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
        patches=["kimi-hooks"],
        commit="abc",
    )
    assert (rec.host, rec.run_id, rec.deployment, rec.engine) == (
        "gpu-node",
        meta.run_id,
        "kimi",
        "sglang",
    )
    assert rec.who == operator() and rec.script_sha256 == "e" * 64 and rec.repo_commit == "abc"
    assert rec.env == {"HF_TOKEN": MASK, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    assert (datetime.now(UTC) - rec.at).total_seconds() < 60 and rec.patches == ("kimi-hooks",)
    assert run_record(Action.STOP, Outcome.STOPPED, meta).repo_commit != ""
    assert rec.firedup_version == __version__
    assert HistoryRecord.from_json(json.loads(rec.to_line())).firedup_version == __version__


def test_the_commit_is_the_inventory_repositorys_not_the_cwds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = tmp_path / "ops"
    (ops / "inventory").mkdir(parents=True)
    (ops / "inventory" / "hosts.yaml").write_text(
        "hosts: {n: {transport: local, workdir: /w, deployment: d}}\n"
        "deployments: {d: {engine: vllm, model: /m}}\n"
    )
    git = ["git", "-C", str(ops), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(ops)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # fab runs from a directory that is no repository at all
    host = load_inventory(ops / "inventory" / "hosts.yaml").host("n")
    assert inventory_commit(host) == sha.strip()
    assert inventory_commit(host.model_copy(update={"source": None})) == "unknown"


def test_last_start_skips_stops_and_patches() -> None:
    records = [
        record("r1", Outcome.FAILED, reason="oom"),
        record("r1", Outcome.STOPPED, action=Action.STOP),
        record("", Outcome.APPLIED, action=Action.SYNC_PATCHES),
    ]
    found = last_start(records)
    assert found is not None and found.reason == "oom"
    assert last_start(records[1:]) is None


def test_repo_commit_never_runs_the_repository_hooks(tmp_path: Path) -> None:
    """Issue 28 §5: `git status` in the inventory's repository must not run what its
    config names (core.fsmonitor runs a command on every status)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    ran = tmp_path.parent / f"{tmp_path.name}-fsmonitor-ran"
    hook = tmp_path / "monitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    subprocess.run([*git, "config", "core.fsmonitor", str(hook)], check=True)
    (tmp_path / "f").write_text("2")
    assert repo_commit(tmp_path).endswith("+dirty")
    assert not ran.exists(), "core.fsmonitor ran"
