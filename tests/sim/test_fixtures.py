"""The recorded logs (tests/fixtures/logs/sim) exist for every scenario and still say it."""

from __future__ import annotations

import re

import pytest

from tests.sim.simhelp import REPO, scenarios

FIXTURES = REPO / "tests" / "fixtures" / "logs" / "sim"


@pytest.mark.parametrize("scenario", scenarios.SCENARIOS, ids=lambda s: s.fixture_name)
def test_fixture_matches_scenario(scenario) -> None:  # type: ignore[no-untyped-def]
    path = FIXTURES / scenario.fixture_name
    assert path.is_file(), f"run: python3 sim/record_fixtures.py --only {path.stem}"
    text = path.read_bytes().decode()
    for expected in scenario.texts:
        assert expected in text
    if scenario.engine == "vllm":
        assert "Uvicorn running on" not in text


def test_bars_are_carriage_return_updates() -> None:
    text = (FIXTURES / "sglang-kimi-eagle3-ready.log").read_bytes().decode()
    segments = [seg for seg in text.split("\r") if seg.startswith("Capturing batches (bs=")]
    counts = {m.group(0) for seg in segments for m in [re.search(r"\d+/23", seg)] if m}
    assert {f"{i}/23" for i in range(24)} <= counts
    # Largest batch size first, and only the closing refresh ends the line.
    assert segments[0].startswith("Capturing batches (bs=48 ")
    bar = re.compile(
        r"Capturing batches \(bs=\d+ avail_mem=[\d.]+ GB\): +\d+%\|[^|]*\| (\d+)/23 \[[^\]]*\]"
    )
    for seg in segments:
        match = bar.match(seg)
        assert match, seg
        assert seg[match.end() :].startswith("\n") == (match.group(1) == "23")
