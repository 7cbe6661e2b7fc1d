"""`fab explain-log`: the formatting, the task body, and the real `fab` command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke.context import Context
from invoke.exceptions import Exit

from firedup.engine import Engine
from firedup.errors import UsageError
from firedup.ops.explain import explain_file, looks_binary, parse_engine, to_json, to_text
from tasks.explain import explain_log

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
FAB = Path(sys.executable).with_name("fab")
REQUIRED_KEYS = {"verdict", "engine", "phase", "reason", "hint", "excerpt", "phases", "progress"}


def test_failed_log_explains_reason_hint_excerpt_and_phase_times() -> None:
    text = to_text(explain_file(LOGS / "sglang" / "kimi_v3_context_length.log"))
    assert "verdict   FAILED" in text
    assert "reason    context_length" in text
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in text
    assert "  | ValueError: Warning: Target model's context_length (262144)" in text
    assert "  loading_weights   23:41:11      9m37s" in text
    assert "<- failed here" in text


def test_stalled_capture_shows_progress_and_time_so_far() -> None:
    text = to_text(explain_file(LOGS / "sglang" / "kimi_v5_draft_capture_at_0_of_23.log"))
    assert "verdict   STARTING" in text
    assert "progress  Capturing batches (bs=48 avail_mem=21.50 GB) 0/23" in text
    assert "(so far)" in text and "reason" not in text


def test_json_has_the_promised_keys(tmp_path: Path) -> None:
    ready = json.loads(to_json(explain_file(LOGS / "vllm" / "v1_tp8_ready.log")))
    assert set(ready) >= REQUIRED_KEYS
    assert (ready["verdict"], ready["reason"], ready["hint"]) == ("ready", None, None)
    assert all({"phase", "start", "end"} <= set(span) for span in ready["phases"])
    # vLLM prints no year: it comes from the file's modification time.
    log = tmp_path / "vllm.log"
    log.write_bytes((LOGS / "vllm" / "v1_tp8_ready.log").read_bytes())
    os.utime(log, (1_700_000_000, 1_700_000_000))  # 2023-11-14
    first = json.loads(to_json(explain_file(log)))["phases"][0]
    assert first["start"] == "2023-02-22T23:41:02"


def test_empty_binary_and_unrecognised_files_get_a_note(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert "the log is empty" in to_text(explain_file(empty))
    binary = explain_file(LOGS / "field" / "binary_garbage.log")
    assert binary.state.verdict.value == "starting"
    assert any("does not look like a text log" in note for note in binary.notes)
    prose = tmp_path / "prose.log"
    prose.write_bytes(b"hello\n")
    assert any("--engine" in note for note in explain_file(prose).notes)


def test_logrotate_nul_padding_is_not_binary() -> None:
    assert not looks_binary(b"\x00" * 4096 + b"[2026-02-22 23:41:02] server_args=...\n")
    assert looks_binary(bytes(range(256)) * 8)


def test_unreadable_paths_and_bad_engine_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        explain_file(tmp_path / "missing.log")
    with pytest.raises(UsageError, match="is a directory"):
        explain_file(tmp_path)
    with pytest.raises(UsageError, match="cannot read"):
        explain_file("/proc/self/mem")  # exists, is a file, and read() fails even for root
    with pytest.raises(UsageError, match="unknown --engine 'tgi'"):
        parse_engine("tgi")
    assert parse_engine("VLLM") is Engine.VLLM and parse_engine(None) is None


def test_task_body_prints_and_turns_errors_into_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    explain_log(Context(), path=str(LOGS / "vllm" / "v1_tp8_ready.log"), json=True)
    assert json.loads(capsys.readouterr().out)["verdict"] == "ready"
    for kwargs in ({}, {"path": str(tmp_path / "nope")}, {"path": "--help"}):
        with pytest.raises(Exit) as caught:
            explain_log(Context(), **kwargs)
        assert caught.value.code == 2
        assert "\n" not in str(caught.value.message)


def _fab(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(FAB), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def fab_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fabfile holding only this task, so the command line is tested whatever else
    tasks/__init__.py registers; the project's own fabfile is checked separately below."""
    where = tmp_path_factory.mktemp("fab")
    (where / "fabfile.py").write_text(
        "from invoke import Collection\n"
        "from tasks.explain import explain_log\n"
        "ns = Collection(explain_log)\n"
    )
    return where


def test_fab_explain_log_on_a_truncated_log(fab_dir: Path) -> None:
    log = LOGS / "sglang" / "truncated_mid_line_mid_utf8.log"
    done = _fab(fab_dir, "explain-log", str(log))
    assert done.returncode == 0, done.stderr
    assert "verdict   STARTING" in done.stdout
    assert "phase     loading_weights" in done.stdout
    assert "ends mid-line" in done.stdout


def test_fab_explain_log_json_with_engine(fab_dir: Path) -> None:
    log = LOGS / "vllm" / "v1_engine_core_oom_during_profile.log"
    done = _fab(fab_dir, "explain-log", str(log), "--engine", "vllm", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["verdict"], data["reason"], data["engine"]) == ("failed", "oom", "vllm")
    assert "torch.OutOfMemoryError: CUDA out of memory" in data["excerpt"][-1]


@pytest.mark.parametrize("name", ["empty.log", "binary_garbage.log"])
def test_fab_explain_log_on_empty_and_binary_files(fab_dir: Path, name: str) -> None:
    done = _fab(fab_dir, "explain-log", str(LOGS / "field" / name))
    assert done.returncode == 0, done.stderr
    assert "verdict   STARTING" in done.stdout and "note" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["explain-log", "/nonexistent/server.log"], "no such file"),
        (["explain-log", "/tmp"], "is a directory"),
        (["explain-log", "/proc/self/mem"], "cannot read"),
        (["explain-log", "x.log", "--engine", "tgi"], "unknown --engine"),
    ],
)
def test_fab_explain_log_errors_are_one_line_exit_2(
    fab_dir: Path, args: list[str], message: str
) -> None:
    done = _fab(fab_dir, *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_project_fabfile_runs_explain_log() -> None:
    listing = _fab(ROOT, "--list")
    if "explain-log" not in listing.stdout:
        pytest.skip("tasks/__init__.py does not register explain-log yet")
    done = _fab(ROOT, "explain-log", str(LOGS / "field" / "empty.log"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["phase"] == "launching"
