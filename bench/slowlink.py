"""Waits over slow links: ready and crash latency, wire bytes and node CPU per link and log.

Every tool reaches the sshd through a `SlowLink` relay (tests/slowlink.py): one token bucket
per direction shared by every connection through it, like one access link, plus 50 ms each
way. Links: 1 MB/s, 200 KB/s, 150 KB/s. Logs: quiet (the engine's own ~10 KB) and noisy
(bench/nodeside/noisy-python writes NOISE_MB of NCCL INFO lines into the run's log from the
launch, all of it within about a second). The engine runs at FIREDUP_SIM_SPEED=0.25 (ready ~7 s
after launch; the oom_load crash ~3 s). "not yet classified in order": log bytes written before
the event that the node's in-order classifier had not reached (sampled from the wait's own log
feed): the backlog that made the old wait late. The node reader peeks at the log's end while
it is behind, so the verdict is sent before that backlog is worked through. Wire bytes are the
SSH connection's from the node to the operator, handshake included; the reader's sources go
the other way once per wait (about 24 KB).

Before the log was read on the node (issue 17, the same relay, 30 MB log), the wait streamed
the whole log: ready 31.9 s and crash 41.5 s after the event at 1 MB/s, 168 s and 213 s at
200 KB/s, and at 150 KB/s the crash was never reported (each read of the log's end timed out
and was retried from the same offset until the deadline).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench.latency import Target, new_target
from bench.report import fmt, median, table
from bench.rig import Rig, node_cpu_s, read_event
from bench.tools import BENCH, Ansible, start_loop
from firedup.errors import DeployError
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.readiness.logfeed import LogFeed
from firedup.readiness.wait import WaitOptions, wait_ready
from tests.slowlink import SlowLink

NOISY_PYTHON = str(BENCH / "nodeside" / "noisy-python")
LINKS = {"1 MB/s": 1_000_000, "200 KB/s": 200_000, "150 KB/s": 150_000}
DELAY_S = 0.05
EVENT = {"ready": "ready", "crash": "crashed"}


@dataclass
class LinkSample:
    link: str
    log: str
    tool: str
    case: str
    latency_s: float | None
    outcome: str
    log_bytes: int
    wire_from_node: int
    window_s: float
    node_cpu_s: float
    unread_at_event: int | None = None


@contextmanager
def feed_offsets() -> Iterator[list[tuple[float, int]]]:
    """(wall time, bytes classified) each time the wait's log feed learns more."""
    seen: list[tuple[float, int]] = []
    apply, feed = LogFeed.apply, LogFeed.feed

    def apply_noted(self: LogFeed, frame: dict[str, Any]) -> bool:
        result = apply(self, frame)
        seen.append((time.time(), self.offset))
        return result

    def feed_noted(self: LogFeed, chunk: bytes) -> bool:
        result = feed(self, chunk)
        seen.append((time.time(), self.offset))
        return result

    LogFeed.apply, LogFeed.feed = apply_noted, feed_noted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        LogFeed.apply, LogFeed.feed = apply, feed  # type: ignore[method-assign]


class SizeSampler:
    """The log's size every 20 ms (the node is this machine: read it directly)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.02):
            size = self.path.stat().st_size if self.path.exists() else 0
            self.samples.append((time.time(), size))

    def at(self, moment: float) -> int:
        self.stop.set()
        self.thread.join()
        return max((s for t, s in self.samples if t <= moment), default=0)


def _unread(sizes: SizeSampler, offsets: list[tuple[float, int]], event: float | None) -> int:
    if event is None:
        return 0
    known = max((o for t, o in offsets if t <= event), default=0)
    return max(0, sizes.at(event) - known)


class SlowLinkBench:
    def __init__(self, rig: Rig, ansible: Ansible | None, noise_mb: float) -> None:
        self.rig = rig
        self.ansible = ansible
        self.noise_mb = noise_mb
        self.relay = SlowLink(rig.sshd.port)
        rig.trust_port(self.relay.port)
        self.link = ""
        self.log = ""

    def set(self, link: str, log: str) -> None:
        self.relay.set_rate(LINKS[link], DELAY_S)
        self.link, self.log = link, log

    def _target(self, case: str) -> Target:
        env = {"FIREDUP_SIM_SPEED": "0.25"}
        if case == "crash":
            env["FIREDUP_SIM_FAULT"] = "oom_load"
        if self.log == "quiet":
            return new_target(self.rig, "slow", **env)
        env["BENCH_NOISE_MB"] = f"{self.noise_mb:g}"
        return new_target(self.rig, "slow", python=NOISY_PYTHON, **env)

    def _launch(self, case: str) -> tuple[Target, SshNode, RunMeta]:
        target = self._target(case)
        spec = target.spec.model_copy(update={"port": self.relay.port})
        node = SshNode(spec)
        return target, node, start_plan(node, plan_deploy(spec, target.deployment))

    def _sample(self, tool: str, case: str, target: Target, run: RunMeta, **kw: Any) -> LinkSample:
        event = read_event(target.events, EVENT[case], run.pid)
        reported = kw.pop("reported")
        latency = reported - event if reported is not None and event is not None else None
        log_bytes = Path(run.log_path).stat().st_size
        return LinkSample(self.link, self.log, tool, case, latency, log_bytes=log_bytes, **kw)

    def _mark(self) -> tuple[float, int, float]:
        return time.time(), self.relay.snapshot()[1], node_cpu_s(self.rig.sshd_pid)

    def _since(self, mark: tuple[float, int, float], end: float) -> dict[str, Any]:
        t0, down0, cpu0 = mark
        wire = self.relay.snapshot()[1] - down0
        cpu = node_cpu_s(self.rig.sshd_pid) - cpu0
        return {"wire_from_node": wire, "window_s": end - t0, "node_cpu_s": cpu}

    def firedup(self, case: str) -> LinkSample:
        target, node, run = self._launch(case)
        sizes, mark = SizeSampler(run.log_path), self._mark()
        with feed_offsets() as offsets:
            try:
                wait_ready(node, run, WaitOptions(timeout_s=120, tick_s=1.0))
                outcome = "READY"
            except DeployError as exc:
                outcome = type(exc).__name__
            reported = time.time()
        try:
            sample = self._sample(
                "firedup", case, target, run, reported=reported, outcome=outcome,
                **self._since(mark, reported),
            )  # fmt: skip
            event = read_event(target.events, EVENT[case], run.pid)
            sample.unread_at_event = _unread(sizes, offsets, event)
            return sample
        finally:
            stop_run(node, run, grace_s=2)
            node.close()

    def loop(self, case: str) -> LinkSample:
        target, node, run = self._launch(case)
        mark = self._mark()
        lines = start_loop(self.rig, 1, 0.5, 90, run.log_path, port=self.relay.port)
        lines.wait(150)
        first = lines.first("READY", "FAILED", "TIMEOUT")
        ok = first is not None and first[1] != "TIMEOUT"
        end = first[0] if first else time.time()
        try:
            return self._sample(
                "loop 1s", case, target, run, reported=end if ok else None,
                outcome=first[1] if first else "?", **self._since(mark, end),
            )  # fmt: skip
        finally:
            stop_run(node, run, grace_s=2)
            node.close()

    def ansible_wait(self, case: str) -> LinkSample:
        assert self.ansible is not None
        target = self._target(case)
        spec = target.spec.model_copy(update={"port": self.relay.port})
        node = SshNode(spec)
        plan = plan_deploy(spec, target.deployment)
        extra = {"log": f"{plan.rundir}/server.log", "wait_timeout": 60}
        lines = self.ansible.start("wait.yml", extra, port=self.relay.port)
        self.ansible.wait_module_running(120)
        run = start_plan(node, plan)
        mark = self._mark()
        lines.wait(180)
        ok = lines.first("ok: [node]")
        end = ok[0] if ok else time.time()
        try:
            return self._sample(
                "ansible wait_for", case, target, run, reported=ok[0] if ok else None,
                outcome="READY" if ok else "never", **self._since(mark, end),
            )  # fmt: skip
        finally:
            stop_run(node, run, grace_s=2)
            node.close()

    def close(self) -> None:
        self.relay.close()


def run_slowlink(
    rig: Rig,
    ansible: Ansible | None,
    noise_mb: float,
    repeats: int,
    links: list[str],
    log: Callable[[str], None],
) -> list[LinkSample]:
    bench = SlowLinkBench(rig, ansible, noise_mb)
    samples: list[LinkSample] = []
    try:
        for link in links:
            for kind in ("quiet", f"{noise_mb:g} MB"):
                bench.set(link, kind)
                runs: list[Callable[[], LinkSample]] = []
                for case in ("ready", "crash"):
                    runs += [partial(bench.firedup, case)] * repeats
                    runs.append(partial(bench.loop, case))
                if ansible is not None:
                    runs.append(partial(bench.ansible_wait, "ready"))
                for measure in runs:
                    s = measure()
                    samples.append(s)
                    lat = "never" if s.latency_s is None else f"{s.latency_s:+.2f}s"
                    log(
                        f"  {link:8s} {kind:6s} {s.case:5s} {s.tool:16s} {lat:>8s} "
                        f"{s.outcome:18s} wire {s.wire_from_node / 1e6:6.3f} MB of "
                        f"{s.log_bytes / 1e6:5.1f} MB, unread {s.unread_at_event}"
                    )
    finally:
        bench.close()
    return samples


def _cell(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "—"
    never = sum(1 for r in runs if r["latency_s"] is None)
    text = fmt(median(r["latency_s"] for r in runs))
    return text + (f" ({never}/{len(runs)} never)" if never else "")


def render_slowlink(samples: list[dict[str, Any]]) -> str:
    rows = []
    keys = list(dict.fromkeys((s["link"], s["log"]) for s in samples))
    for link, kind in keys:
        group = [s for s in samples if (s["link"], s["log"]) == (link, kind)]

        def pick(tool: str, case: str, group: list[dict[str, Any]] = group) -> list[Any]:
            return [s for s in group if s["tool"] == tool and s["case"] == case]

        fire = pick("firedup", "ready") + pick("firedup", "crash")
        log_mb = median(s["log_bytes"] for s in fire) or 0
        wire = median(s["wire_from_node"] / s["log_bytes"] for s in fire if s["log_bytes"])
        cpu = median(100 * s["node_cpu_s"] / s["window_s"] for s in fire if s["window_s"])
        unread = median(s["unread_at_event"] for s in fire if s["unread_at_event"] is not None)
        rows.append(
            [
                link,
                f"{kind} ({log_mb / 1e6:.1f} MB)",
                _cell(pick("firedup", "ready")),
                _cell(pick("firedup", "crash")),
                fmt(unread / 1e3 if unread is not None else None, " KB", 0),
                fmt(median(s["wire_from_node"] for s in fire) / 1e6, " MB", 3)
                + (f" ({100 * (wire or 0):.2f}% of log)" if log_mb > 1e6 else ""),
                fmt(cpu, "%", 1),
                f"{_cell(pick('loop 1s', 'ready'))} / {_cell(pick('loop 1s', 'crash'))}",
                _cell(pick("ansible wait_for", "ready")),
            ]
        )
    headers = [
        "link (+50 ms each way)",
        "log",
        "firedup ready",
        "firedup crash",
        "log not yet classified in order at the event",
        "firedup wire, node→operator",
        "node CPU (firedup)",
        "1 s loop ready / crash",
        "Ansible wait_for ready",
    ]
    return table(headers, rows)
