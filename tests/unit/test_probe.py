"""The probe parser, on recorded output of firedup/node/sh/probe.sh."""

from __future__ import annotations

from pathlib import Path

import pytest

from firedup.node.probe import ProbeParseError, parse_listeners, parse_probe

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "probe"


def test_ready_probe() -> None:
    probe = parse_probe((FIXTURES / "probe-ready.out").read_bytes())
    assert probe.pid == 4242
    assert probe.procs == {4242, 4250, 4251}
    assert probe.alive and probe.listening_ours
    assert [lst.local for lst in probe.foreign_listeners] == ["[::]:30123"]
    assert probe.log_chunk.endswith(b"\xff\xfe")  # bytes survive exactly
    assert probe.log_size == 99


def test_probe_without_run_or_ss() -> None:
    probe = parse_probe((FIXTURES / "probe-nolog.out").read_bytes())
    assert probe.pid is None and not probe.alive
    assert not probe.ss_available and probe.listeners == ()
    assert probe.log_chunk == b"" and probe.log_size is None


def test_listener_without_visible_pid_is_foreign() -> None:
    (listener,) = parse_listeners("LISTEN 0 5 0.0.0.0:8000 0.0.0.0:*\n")
    assert listener.pids == frozenset()


def test_garbage_is_refused() -> None:
    with pytest.raises(ProbeParseError):
        parse_probe(b"pyenv: command not found\n")
    with pytest.raises(ProbeParseError):
        parse_probe(b"now=1\nlog=!!!notbase64\n")
