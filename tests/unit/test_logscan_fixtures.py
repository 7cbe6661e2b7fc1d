"""Every recorded log is classified as its sidecar says.

A case is `tests/fixtures/logs/<group>/<case>.log` with `<case>.expected.json` beside it:
{"verdict": ..., "phase": ..., "reason": ..., optionally "engine" and "progress"}. A log seen in
the field becomes a new pair here, never a special case in this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from firedup.engine import Engine
from firedup.logscan import LogScanner, ScanState, Verdict, explain
from firedup.logscan.evidence import MAX_EXCERPT_LINES

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
# The simulator writes its logs first and its expectations may come later; every other
# group is written by hand, so a log without a sidecar there is a mistake.
SIDECAR_OPTIONAL = {"sim"}


def _cases() -> list[Path]:
    return sorted(LOGS.glob("*/*.log"))


def _expected(log: Path) -> dict[str, Any] | None:
    sidecar = log.with_name(log.name[: -len(".log")] + ".expected.json")
    return json.loads(sidecar.read_text()) if sidecar.exists() else None


def _engine(expected: dict[str, Any]) -> Engine | None:
    return Engine(expected["engine"]) if expected.get("engine") else None


def _summary(state: ScanState, expected: dict[str, Any]) -> dict[str, Any]:
    got: dict[str, Any] = {
        "verdict": state.verdict.value,
        "phase": state.phase.value,
        "reason": state.reason.value if state.reason else None,
    }
    if "engine" in expected:
        got["engine"] = state.engine.value if state.engine else None
    if "progress" in expected:
        bar = state.progress
        got["progress"] = {"done": bar.done, "total": bar.total} if bar else None
    return got


@pytest.mark.parametrize("log", _cases(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_is_classified_as_expected(log: Path) -> None:
    expected = _expected(log)
    if expected is None:
        if log.parent.name in SIDECAR_OPTIONAL:
            pytest.skip(f"{log.name}: no .expected.json beside it yet")
        pytest.fail(f"{log}: add {log.stem}.expected.json beside it")
    state = explain(log.read_bytes())
    want = {key: expected.get(key) for key in _summary(state, expected)}
    assert _summary(state, expected) == want, "\n".join(state.excerpt)
    _check_failure_is_explained(state)


@pytest.mark.parametrize("log", _cases(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_given_engine_agrees_with_detected(log: Path) -> None:
    """Telling the scanner the engine (as the readiness wait does) changes nothing."""
    expected = _expected(log)
    if expected is None or _engine(expected) is None:
        pytest.skip("no engine to give")
    scanner = LogScanner(engine=_engine(expected))
    scanner.feed(log.read_bytes())
    scanner.finish()
    assert _summary(scanner.state, expected) == _summary(explain(log.read_bytes()), expected)


def _check_failure_is_explained(state: ScanState) -> None:
    if state.verdict is Verdict.FAILED:
        assert state.reason is not None
        assert state.hint, "every reason carries a hint"
        assert 1 <= len(state.excerpt) <= MAX_EXCERPT_LINES
        assert state.phases[-1].phase is state.phase
    else:
        assert state.reason is None and state.hint is None and state.excerpt == ()
    data = json.loads(json.dumps(state.to_json()))
    assert {"verdict", "engine", "phase", "reason", "hint", "excerpt", "phases", "progress"} <= set(
        data
    )


def test_there_are_enough_hand_written_cases() -> None:
    groups = {"sglang", "vllm", "field"}
    hand_written = [log for log in _cases() if log.parent.name in groups]
    assert len(hand_written) >= 40
    reasons = {(_expected(log) or {}).get("reason") for log in hand_written}
    assert reasons >= {
        "oom",
        "context_length",
        "missing_model_hook",
        "nccl",
        "port_in_use",
        "model_not_found",
        "cuda_graph_capture",
        "warmup_failed",
        "engine_init",
        "killed",
        "crash",
        None,
    }
