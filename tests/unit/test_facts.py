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
    assert _watch(live, watch_alive(live)) == {**json.loads(live), "on": True}
    on = _watch(stale, watch_alive(stale))
    assert on is not None and on["on"] is False
    ended = json.dumps({"watch_pid": pid, "watch_start": int(start), "state": "ended"})
    result = _watch(ended, watch_alive(ended))
    assert result is not None and result["on"] is False
