"""Fixtures for driving the simulated node: real processes, real ports, own process groups."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.sim.simhelp import FAST, simrun


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., object]]:
    """launch(scenario, speed=FAST) starts a SimRun; every run is stopped at teardown."""
    runs: list = []

    def start(scenario: object, speed: float = FAST) -> object:
        run = simrun.SimRun(scenario, tmp_path / f"run{len(runs)}", speed)
        runs.append(run)
        return run.start()

    yield start
    for run in runs:
        run.stop()
