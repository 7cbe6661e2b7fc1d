"""The watch's file in status's round trip: `on` only for a state that means on, written by a
watch that still runs (its pid with the start time it recorded), as /work/notes/watch.md says."""

from __future__ import annotations

import json
import os
from pathlib import Path

from firedup.ops.facts import _watch
from firedup.readiness.nodefacts import watch_alive


def _me() -> tuple[int, str]:
    fields = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    return os.getpid(), fields[19]


def test_a_running_watch_is_on_and_a_stale_one_is_not() -> None:
    pid, start = _me()
    live = json.dumps({"watch_pid": pid, "watch_start": int(start), "state": "watching"})
    stale = json.dumps({"watch_pid": pid, "watch_start": int(start) + 1, "state": "watching"})
    assert watch_alive(live) and not watch_alive(stale)
    assert not watch_alive(None) and not watch_alive("not json")
    view = _watch(live, watch_alive(live))
    assert view is not None and view.on and view.raw == json.loads(live)
    assert view.to_json()["on"] is True and view.state == "watching"
    on = _watch(stale, watch_alive(stale))
    assert on is not None and on.on is False
    ended = json.dumps({"watch_pid": pid, "watch_start": int(start), "state": "ended"})
    result = _watch(ended, watch_alive(ended))
    assert result is not None and result.on is False
    assert _watch("not json", True) is None and _watch(None, True) is None


def _read_to_end(log: Path) -> None:
    import subprocess

    from firedup.readiness.shipping import new_nonce, reader_argv

    options = {"log": str(log), "offset": 0, "pid": None, "engine": "", "look": None}
    subprocess.run(reader_argv(options, new_nonce(), ["true"]), capture_output=True, check=True)


def test_the_reader_summarises_a_runs_log_only_and_privately(tmp_path: Path) -> None:
    other = tmp_path / "other" / "fixture.log"
    run_log = tmp_path / "run" / "server.log"
    for log in (other, run_log):
        log.parent.mkdir()
        log.write_bytes(b"Application startup complete.\n")
        _read_to_end(log)
    assert not (other.parent / "reader.json").exists()  # nothing written beside other files
    summary = run_log.parent / "reader.json"
    assert json.loads(summary.read_text())["offset"] == run_log.stat().st_size
    assert summary.stat().st_mode & 0o077 == 0
