"""What a person sees and what a program reads, from the real `fab deploy` of the story's final
launch on the simulated node over real SSH.

A person: the command runs inside a real terminal (tmux, 80 and 200 columns) and the screen is
read with capture-pane during and after the wait: no line twice, no line wrapped by the
terminal, time in phase ticking between two captures a second apart, the capture bar seen
strictly between 0 and N, the timeline on screen at the end. The tmux server is this test's
own (`-L <unique name>`) and is ended with kill-server on that socket.

A program: `fab deploy --json` prints nothing but events on stdout, each valid against
docs/events.schema.json, phases in order with the bar's progress; a crash ends with one
verdict naming the reason.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import (
    FAB,
    REPO,
    Sshd,
    fab,
    free_port,
    stop_runs,
    story_deployments,
    story_hosts,
    wait_until,
)

pytestmark = pytest.mark.ssh

SCHEMA = json.loads((REPO / "docs" / "events.schema.json").read_text())
STATUS_SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
LIVE = re.compile(rf"^[{SPINNER}] (?P<phase>[a-z_]+)\s.*?(?P<in_phase>[0-9.hms]+) in phase")
RECORD_EXIT = (  # Ctrl-C reaches the whole pane's group: the wrapper waits on, fab decides
    "import pathlib, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[2:])\n"
    "while True:\n"
    "    try:\n"
    "        code = child.wait()\n"
    "        break\n"
    "    except KeyboardInterrupt:\n"
    "        pass\n"
    "pathlib.Path(sys.argv[1] + '.tmp').write_text(str(code))\n"
    "pathlib.Path(sys.argv[1] + '.tmp').rename(sys.argv[1])\n"
    "import time; time.sleep(600)\n"  # the pane stays as fab left the terminal
)
BAR = re.compile(r"\s(?P<done>\d+)/(?P<total>\d+)\s")


def story_v5(sshd: Sshd, root: Path, write: Callable[..., Path], **env: str) -> Path:
    deployments = story_deployments(free_port())
    hosts = story_hosts(sshd, root, ["v5"])
    hosts["v5"]["env"] = {**hosts["v5"]["env"], **env}
    return write(hosts, {"v5": deployments["v5"]})


@pytest.fixture
def v5(sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Iterator[Path]:
    # Slow enough that phases last seconds: the screen is read while they tick.
    inv = story_v5(sshd, tmp_path, write_inventory, FIREDUP_SIM_SPEED="0.6")
    yield inv
    stop_runs(inv)


def seconds(text: str) -> float:
    """`0.4s`, `12s`, `6m12s` (tasks/live duration_text) back to seconds."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?", text)
    assert match, text
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


class Tmux:
    """A tmux server of our own, addressed only by its socket name."""

    def __init__(self, root: Path) -> None:
        self.name = f"firedup-test-{uuid.uuid4().hex[:10]}"
        self.conf = root / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g status off\n")
        self.status = root / "exit-status"
        self.socket: Path | None = None

    def tmux(self, *args: str) -> str:
        argv = ["tmux", "-L", self.name, "-f", str(self.conf), *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=10).stdout

    def start(self, width: int, argv: list[str]) -> None:
        # argv as separate words: tmux execs it without a shell. A python wrapper writes the
        # exit status to a file when the command ends (tmux's pane_dead_status can stay empty)
        # and keeps the pane alive, so the screen and cursor are as fab left them.
        self.status.unlink(missing_ok=True)
        wrapper = [sys.executable, "-c", RECORD_EXIT, str(self.status), *argv]
        self.tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", "50", *wrapper)
        self.socket = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def screen(self) -> str:
        # -J joins rows the terminal wrapped: a wrapped line comes back longer than the width.
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")

    def dead(self) -> bool:
        return self.status.exists() and self.status.read_text() != ""

    def exit_status(self) -> int:
        return int(self.status.read_text())

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, timeout=10)
        if self.socket is not None:  # tmux leaves its socket file behind
            self.socket.unlink(missing_ok=True)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing: scripts/test.sh installs it")
    server = Tmux(tmp_path)
    yield server
    server.kill()


def watch(tmux: Tmux, deadline_s: float) -> list[tuple[float, str]]:
    """Capture the screen every ~0.1 s until the command ends; (time, screen) pairs."""
    shots = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        shots.append((time.monotonic(), tmux.screen()))
        if tmux.dead():
            shots.append((time.monotonic(), tmux.screen()))
            return shots
        time.sleep(0.1)
    raise AssertionError("fab deploy did not end in time:\n" + shots[-1][1])


def check_screen(screen: str, width: int) -> None:
    lines = [ln.rstrip() for ln in screen.splitlines() if ln.strip()]
    too_wide = [ln for ln in lines if len(ln) > width]
    assert not too_wide, f"wrapped at {width} columns: {too_wide}"
    twice = {ln for ln in lines if lines.count(ln) > 1}
    assert not twice, f"shown twice: {twice}\n{screen}"


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 200])
def test_the_live_display_in_a_real_terminal(v5: Path, tmux: Tmux, width: int) -> None:
    tmux.start(width, [FAB, "deploy", "--host", "v5", "--inventory", str(v5)])
    shots = watch(tmux, deadline_s=120)
    for _, screen in shots:
        check_screen(screen, width)
    live = []  # (time, phase, seconds in phase, bar) of each capture showing the live line
    for at, screen in shots:
        for row in screen.splitlines():
            match = LIVE.match(row)
            if match:
                bar = BAR.search(row)
                done = (int(bar["done"]), int(bar["total"])) if bar else None
                live.append((at, match["phase"], seconds(match["in_phase"]), done))
    assert live, shots[-1][1]
    pairs = [
        (a, b)
        for i, a in enumerate(live)
        for b in live[i + 1 :]
        if a[1] == b[1] and b[0] - a[0] >= 1.0 and b[0] - a[0] < 1.5
    ]
    assert pairs, f"no phase lasted a second on screen: {[(p, s) for _, p, s, _ in live]}"
    assert all(b[2] > a[2] for a, b in pairs), pairs  # time in phase ticks on its own
    bars = {done for _, phase, _, done in live if done and phase == "cuda_graph"}
    assert any(0 < done < total for done, total in bars), bars
    assert tmux.exit_status() == 0
    final = shots[-1][1]
    assert not LIVE.search(final), final  # the live line is gone, the terminal left clean
    phases = ["launching", "loading_weights", "cuda_graph", "draft_cuda_graph", "warmup"]
    for phase in phases:
        assert re.search(rf"^  ✓ {phase}\s+[0-9.ms]+s", final, re.M), (phase, final)
    assert re.search(r"^  total \S+, slowest \w+ \S+$", final, re.M), final
    assert "v5: READY" in final
    assert colours(tmux.tmux("capture-pane", "-p", "-e", "-t", "t"))  # colour unless NO_COLOR


def events_of(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line is one event valid against the schema (nothing else on stdout)."""
    events = [json.loads(line) for line in stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    return events


def test_deploy_json_is_an_event_stream(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    # Half speed: the target capture's bar lasts about a second, so a loaded node that reads
    # its log late still sees it under way at least once (at full speed it is 0.6 s).
    inv = story_v5(sshd, tmp_path, write_inventory, FIREDUP_SIM_SPEED="0.5")
    try:
        done = fab("deploy", "--host", "v5", "--inventory", str(inv), "--json")
        status = fab("status", "--host", "v5", "--inventory", str(inv), "--json")
        history = fab("history", "--host", "v5", "--inventory", str(inv), "--json")
    finally:
        stop_runs(inv)
    # The same timeline in `fab status` (from the log's timestamps) and in the history record.
    host = json.loads(status.stdout)["hosts"][0]
    jsonschema.validate(json.loads(status.stdout), STATUS_SCHEMA)
    logged = [s["phase"] for s in host["timeline"]["phases"]]
    assert logged[0] == "launching" and "draft_cuda_graph" in logged and "warmup" in logged
    assert host["timeline"]["slowest"] in logged and host["timeline"]["total_s"] is not None
    record = json.loads(history.stdout)[-1]
    assert record["outcome"] == "ready" and record["run_id"] == host["run_id"]
    assert [p["phase"] for p in record["phases"] if p["phase"] != "ready"] == logged
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    events = events_of(done.stdout)
    kinds = [e["event"] for e in events]
    assert kinds.index("started") < kinds.index("phase") and kinds[-2:] == ["verdict", "timeline"]
    run_ids = {e["run_id"] for e in events[kinds.index("started") :]}
    assert len(run_ids) == 1 and None not in run_ids
    order = ["launching", "loading_weights", "cuda_graph", "draft_cuda_graph", "warmup", "ready"]
    phases = [e["phase"] for e in events if e["event"] == "phase"]
    assert [p for p in phases if p in order] == order
    capture = [e["done"] for e in events if e["event"] == "progress" and e["phase"] == "cuda_graph"]
    # Readings as the stream delivered them (a chunk can hold several redraws): moving forward,
    # ending at the total even when the bar's end and the next phase came in one chunk.
    assert len(set(capture)) >= 2 and capture == sorted(capture) and capture[-1] == 23, capture
    assert events[-2]["outcome"] == "ready" and events[-2]["exit_code"] == 0
    assert events[-1]["slowest"] in order


def test_a_crash_ends_the_json_stream_with_one_verdict_naming_the_reason(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    inv = story_v5(
        sshd, tmp_path, write_inventory, FIREDUP_SIM_FAULT="oom_capture", FIREDUP_SIM_SPEED="3"
    )
    try:
        done = fab("deploy", "--host", "v5", "--inventory", str(inv), "--json")
    finally:
        stop_runs(inv)
    assert done.returncode == 8, done.stderr  # exit codes unchanged by --json
    events = events_of(done.stdout)
    verdicts = [e for e in events if e["event"] == "verdict"]
    assert len(verdicts) == 1 and events[-1]["event"] == "timeline"
    verdict = verdicts[0]
    assert verdict["outcome"] == "failed" and verdict["reason"] == "oom"
    assert verdict["phase"] == "cuda_graph" and verdict["exit_code"] == 8
    assert verdict["excerpt"] and verdict["hint"] and verdict["log_path"].endswith("server.log")
    assert "oom" in done.stderr  # the person's message still goes to stderr


def colours(screen: str) -> list[str]:
    """SGR parameters that set a colour (39/49 are tmux's resets to the default)."""
    params = [p for seq in re.findall(r"\x1b\[([0-9;]*)m", screen) for p in seq.split(";") if p]
    return [p for p in params if 30 <= int(p) <= 38 or 40 <= int(p) <= 48 or int(p) >= 90]


@pytest.mark.slow
def test_ctrl_c_leaves_the_terminal_clean_and_no_color_is_respected(
    v5: Path, tmux: Tmux, tmp_path: Path
) -> None:
    tmux.start(100, ["env", "NO_COLOR=1", FAB, "deploy", "--host", "v5", "--inventory", str(v5)])
    deadline = time.monotonic() + 60
    while True:  # wait for the live line to tick in a phase past the launch
        screen = tmux.tmux("capture-pane", "-p", "-e", "-t", "t")  # -e: with escape sequences
        if re.search(r"(loading_weights|cuda_graph).*in phase", screen):
            break
        assert time.monotonic() < deadline and not tmux.dead(), screen
        time.sleep(0.1)
    assert not colours(screen), repr(screen)  # NO_COLOR: bold at most, no colours
    tmux.tmux("send-keys", "-t", "t", "C-c")
    wait_until(tmux.dead, timeout_s=30, what="fab deploy to end after Ctrl-C")
    final = tmux.screen()
    assert tmux.exit_status() == 130, final
    assert not LIVE.search(final), final  # the live line is gone
    assert "interrupted; the server keeps running" in final
    assert tmux.tmux("display-message", "-p", "-t", "t", "#{cursor_flag}").strip() == "1"
    check_screen(final, 100)


def test_a_crash_on_screen_marks_the_phase_and_gives_the_reason_unwrapped(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path], tmux: Tmux
) -> None:
    inv = story_v5(
        sshd, tmp_path, write_inventory, FIREDUP_SIM_FAULT="oom_capture", FIREDUP_SIM_SPEED="2"
    )
    try:
        tmux.start(80, [FAB, "deploy", "--host", "v5", "--inventory", str(inv)])
        wait_until(tmux.dead, timeout_s=120, what="fab deploy to end")
    finally:
        stop_runs(inv)
    final = tmux.screen()
    assert tmux.exit_status() == 8, final
    too_wide = [ln for ln in final.splitlines() if len(ln.rstrip()) > 80]
    assert not too_wide, too_wide  # the error message too is broken to the width
    assert re.search(r"^  ✗ cuda_graph\s+\S+\s+failed here$", final, re.M), final
    assert "server failed in phase cuda_graph: oom" in final and "hint:" in final
    assert not LIVE.search(final), final
