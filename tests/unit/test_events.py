"""The event model behind the live display and `--json`: a recorded log replayed through a
`HostTracker` on a fake clock; every event validates against docs/events.schema.json."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import jsonschema

from firedup.config.inventory import Engine
from firedup.errors import NotReadyError, ServerCrashedError
from firedup.launch.runs import RunMeta
from firedup.logscan import LogScanner, Phase, ScanState
from firedup.readiness.events import HostTracker, Kind, WaitEvent, ending
from firedup.readiness.timeline import PhaseClock, duration_text, from_spans, inline_text
from firedup.readiness.watch import Signals, WaitStatus

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "events.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
READY_LOG = REPO / "tests" / "fixtures" / "logs" / "sim" / "sglang-kimi-eagle3-ready.log"
OOM_LOG = REPO / "tests" / "fixtures" / "logs" / "sim" / "sglang-fault-oom_capture.log"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run_meta() -> RunMeta:
    return RunMeta(
        run_id="20260101T000000Z-abcdef",
        host="gpu-node",
        deployment="kimi",
        engine=Engine.SGLANG,
        workdir="/data/firedup",
        port=8000,
        script_sha256="0" * 64,
        started_at=0.0,
        started_by="alice@laptop",
        pid=4242,
        engine_version="0.5.9",
    )


def replay(log: Path, clock: Clock, step_s: float = 0.05) -> tuple[HostTracker, list[WaitEvent]]:
    """Feed the log line by line, the clock moving `step_s` per line."""
    tracker = HostTracker("gpu-node", clock=clock, wall=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    events = tracker.started(run_meta())
    scanner = LogScanner(engine=Engine.SGLANG)
    for line in log.read_bytes().splitlines(keepends=True):
        clock.now += step_s
        scanner.feed(line)
        events += tracker.scan(scanner.state)
    return tracker, events


def test_a_ready_startup_gives_phases_in_order_bars_verdict_and_timeline() -> None:
    clock = Clock()
    tracker, events = replay(READY_LOG, clock)
    status = WaitStatus(
        run=run_meta(),
        signals=Signals(alive=True, log_ready=True, listening=True, health=200),
        scan=LogScanner(engine=Engine.SGLANG).state,
        log_offset=0,
        elapsed_s=clock.now - 100.0,
    )
    events += tracker.status(status) + tracker.finish(status)
    for event in events:
        VALIDATOR.validate(event.to_json())
    kinds = [e.kind for e in events]
    assert kinds[0] is Kind.STARTED and kinds[-2:] == [Kind.VERDICT, Kind.TIMELINE]
    phases = [e.data["phase"] for e in events if e.kind is Kind.PHASE]
    order = [Phase(p).order for p in phases]
    assert order == sorted(order) and len(set(phases)) == len(phases)
    assert {"cuda_graph", "draft_cuda_graph", "warmup", "ready"} <= set(phases)
    bars = [e.data for e in events if e.kind is Kind.PROGRESS and e.data["total"] == 23]
    assert any(0 < b["done"] < 23 for b in bars) and bars[-1]["done"] == 23
    assert any(b["rate"] for b in bars)  # tqdm's rate, when the log gives it
    verdict = events[-2].data
    assert verdict["outcome"] == "ready" and verdict["exit_code"] == 0
    timeline = events[-1].data
    assert [s["phase"] for s in timeline["phases"]] == phases[:-1]  # ready is an end, not a step
    assert not any(s["open"] for s in timeline["phases"])
    assert timeline["slowest"] == max(timeline["phases"], key=lambda s: s["duration_s"])["phase"]


def test_progress_events_are_paced_but_the_first_and_last_reading_always_go_out() -> None:
    clock = Clock()
    _, events = replay(READY_LOG, clock, step_s=0.001)  # a fast log: a bar redraws in bursts
    bars = [e.data for e in events if e.kind is Kind.PROGRESS and e.data["total"] == 23]
    assert bars[0]["done"] == 0 and bars[-1]["done"] == 23
    assert len(bars) < 23 * 2  # two captures of 23: not every redraw


def test_a_crash_ends_in_one_verdict_naming_the_reason_the_hint_and_the_log() -> None:
    clock = Clock()
    tracker, events = replay(OOM_LOG, clock)
    scan = tracker_scan(OOM_LOG)
    error = ServerCrashedError(
        "gpu-node: server failed",
        hint=scan.hint,
        reason=scan.reason.value if scan.reason else None,
        excerpt=scan.excerpt,
        log_path="/data/firedup/runs/x/server.log",
    )
    events += tracker.finish(error)
    for event in events:
        VALIDATOR.validate(event.to_json())
    verdicts = [e.data for e in events if e.kind is Kind.VERDICT]
    assert len(verdicts) == 1
    assert verdicts[0]["outcome"] == "failed" and verdicts[0]["reason"] == "oom"
    assert verdicts[0]["exit_code"] == 8 and verdicts[0]["excerpt"] and verdicts[0]["hint"]
    assert verdicts[0]["phase"] == "cuda_graph"
    text = inline_text(tracker.timeline(), ended=ending(error))
    assert "cuda_graph" in text and text.split(";")[0].endswith("(failed)")


def tracker_scan(log: Path) -> ScanState:
    scanner = LogScanner(engine=Engine.SGLANG)
    scanner.feed(log.read_bytes())
    scanner.finish()
    return scanner.state


def test_a_deadline_verdict_says_not_ready() -> None:
    tracker = HostTracker("h", clock=Clock())
    events = tracker.finish(NotReadyError("h: not ready after 30 s"))
    assert [e.kind for e in events] == [Kind.VERDICT]  # no wait began: no timeline
    data = events[0].to_json()
    VALIDATOR.validate(data)
    assert data["outcome"] == "not-ready" and data["reason"] == "deadline"
    assert data["run_id"] is None


def test_time_in_phase_and_log_quiet_tick_with_the_clock_alone() -> None:
    clock = Clock()
    tracker, _ = replay(READY_LOG, clock)
    before = (tracker.in_phase_s(), tracker.quiet_s(), tracker.elapsed_s())
    clock.now += 1.0
    after = (tracker.in_phase_s(), tracker.quiet_s(), tracker.elapsed_s())
    assert all(b + 0.99 < a for b, a in zip(before, after, strict=True))


def test_the_log_timestamps_give_status_the_same_timeline() -> None:
    scanner = LogScanner(engine=Engine.SGLANG)
    scanner.feed(READY_LOG.read_bytes())
    timeline = from_spans(scanner.state.phases)
    assert [s.phase for s in timeline.steps][:3] == [
        Phase.LAUNCHING,
        Phase.INIT_DISTRIBUTED,
        Phase.LOADING_WEIGHTS,
    ]
    assert timeline.total_s is not None and timeline.slowest is not None


def test_phase_clock_and_durations() -> None:
    clock = PhaseClock(0.0)
    assert clock.enter(Phase.LAUNCHING, 0.0) is None
    closed = clock.enter(Phase.LOADING_WEIGHTS, 2.0)
    assert closed is not None and closed.phase is Phase.LAUNCHING and closed.duration_s == 2.0
    timeline = clock.timeline(374.0)
    slowest = timeline.slowest
    assert timeline.steps[-1].open and slowest is not None
    assert slowest.phase is Phase.LOADING_WEIGHTS
    texts = [duration_text(s) for s in (0.42, 12.0, 372.0, 3720.0)]
    assert texts == ["0.4s", "12s", "6m12s", "1h02m"]


def test_signals_stall_and_reconnect_events_validate() -> None:
    from firedup.readiness.budgets import StallWarning

    clock = Clock()
    tracker = HostTracker("gpu-node", clock=clock)
    tracker.started(run_meta())
    scan = LogScanner(engine=Engine.SGLANG).state
    warning = StallWarning(Phase.CUDA_GRAPH, 950.0, 70.0, 900.0, "a bar at 0/N is JIT work")
    status = WaitStatus(
        run=run_meta(),
        signals=Signals(alive=True, log_ready=False, listening=False),
        scan=scan,
        log_offset=0,
        elapsed_s=1.0,
        warning=warning,
    )
    events = tracker.status(status) + tracker.status(status) + tracker.reconnect("dropped")
    kinds = [e.kind for e in events]
    assert kinds.count(Kind.SIGNALS) == 1  # only on a change
    assert kinds.count(Kind.STALL) == 2 and kinds[-1] is Kind.RECONNECT
    for event in events:
        VALIDATOR.validate(event.to_json())
    stall = next(e.data for e in events if e.kind is Kind.STALL)
    assert stall["phase"] == "cuda_graph" and stall["budget_s"] == 900.0


def test_reattaching_times_the_past_phases_by_the_logs_timestamps() -> None:
    """`fab wait` on a run already far along: its past phases keep their real durations."""
    clock = Clock()
    tracker = HostTracker("gpu-node", clock=clock)
    scanner = LogScanner(engine=Engine.SGLANG)
    scanner.feed(READY_LOG.read_bytes())  # the whole log arrives in the first chunk
    tracker.scan(scanner.state)
    seen = {s.phase: s.duration_s for s in tracker.timeline().steps if not s.open}
    logged = {s.phase: s.duration_s for s in from_spans(scanner.state.phases).steps}
    assert seen and seen.keys() <= logged.keys() and any(seen.values())
    assert all(seen[p] == logged[p] for p in seen)
    assert tracker.elapsed_s() >= sum(d or 0 for d in seen.values())


def test_a_bars_last_reading_goes_out_when_the_next_phase_comes_in_the_same_chunk() -> None:
    """Found in CI: a capture that ends with the next phase's first line in one chunk (a
    loaded node reads late) showed its bar stuck at 3/23 in the stream, then the next phase."""
    log = READY_LOG.read_bytes()
    begin = log.index(b"Capture cuda graph begin")
    begin = log.index(b"\n", begin) + 1
    first = log.index(b"\r", log.index(b"Capturing batches", begin)) + 1
    cut = log.index(b"Capture draft cuda graph begin")
    cut = log.index(b"\n", cut) + 1
    clock = Clock()
    tracker = HostTracker("gpu-node", clock=clock, wall=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    events = tracker.started(run_meta())
    scanner = LogScanner(engine=Engine.SGLANG)
    for chunk in (log[:begin], log[begin:first], log[first:cut]):
        clock.now += 0.05
        scanner.feed(chunk)
        events += tracker.scan(scanner.state)
    shown = [(e.kind, e.data["phase"], e.data.get("done")) for e in events if e.data.get("phase")]
    capture = [n for kind, phase, n in shown if kind is Kind.PROGRESS and phase == "cuda_graph"]
    assert capture[0] < capture[-1] == 23, capture
    end = shown.index((Kind.PROGRESS, "cuda_graph", 23))
    assert shown[end + 1][:2] == (Kind.PHASE, "draft_loading"), shown  # the end, then the next
    for event in events:
        VALIDATOR.validate(event.to_json())


def test_reattaching_after_an_untimed_first_chunk_still_times_by_the_log() -> None:
    """Found with the real vLLM (issue 21): its log begins with lines that carry no timestamp
    (warnings, Triton's notice). A `fab wait` re-attaching got those first, entered
    `launching` on the operator's clock, and never caught up: `launching 0.1s, total 0.9s`
    for a run that took a minute."""
    log = (
        REPO / "tests" / "fixtures" / "logs" / "vllm" / "real-cpu-0.32-ready-eager.log"
    ).read_bytes()
    head = log.index(b"(APIServer pid=")  # the first timestamped line
    clock = Clock()
    tracker = HostTracker("cpu-node", clock=clock)
    scanner = LogScanner(engine=Engine.VLLM)
    for chunk in (log[:head], log[head:]):
        clock.now += 0.05
        scanner.feed(chunk)
        tracker.scan(scanner.state)
    seen = {s.phase: s.duration_s for s in tracker.timeline().steps if not s.open}
    logged = {s.phase: s.duration_s for s in from_spans(scanner.state.phases).steps}
    assert seen and seen.keys() <= logged.keys()
    assert all(seen[p] == logged[p] for p in seen), (seen, logged)
    total = from_spans(scanner.state.phases).total_s
    assert total is not None and total > 10  # the run took ~16 s by its timestamps
    assert tracker.elapsed_s() >= total, tracker.elapsed_s()
