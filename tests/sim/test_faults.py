"""Every failing scenario, run at once (they mostly sleep): the right text, exit or silence."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.sim.simhelp import FAST, listening, scenarios, simrun

FAILING = [s for s in scenarios.SCENARIOS if s.expect in ("exit", "hang")]
QUIET_S = 1.5  # a hang: the log stops growing and the process stays alive

# How the launcher ends: SIGKILL from kill_process_tree (-9) or an ordinary exit status.
EXIT_CODES = {
    "sglang-tiny-port-busy": 1,
    "sglang-missing-model": 1,
    "sglang-fault-rank_killed-0.5.10": 1,
    "vllm-tiny-port-busy": 1,
    "vllm-tiny-max-model-len": 1,
    "vllm-fault-oom_load": 1,
    "vllm-fault-rank_killed": 1,
    "vllm-fault-crash_after_ready": 0,  # vLLM may exit 0 after its engine died (#48966)
}


def _outcome(run) -> dict:  # type: ignore[no-untyped-def]
    scenario = run.scenario
    run.start()
    if scenario.expect == "exit":
        code = run.wait_exit(45)
        return {"code": code, "log": run.log(), "alive": run.alive(), "listening": False}
    quiet = run.wait_hang(QUIET_S, 45)
    return {
        "quiet": quiet,
        "log": run.log(),
        "alive": run.alive(),
        "listening": listening(run.port),
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict]]:
    base = Path(tmp_path_factory.mktemp("faults"))
    runs = [simrun.SimRun(s, base / s.fixture_name[:-4], FAST) for s in FAILING]
    try:
        with ThreadPoolExecutor(len(runs)) as pool:
            results = list(pool.map(_outcome, runs))
        yield {r.scenario.fixture_name[:-4]: res for r, res in zip(runs, results, strict=True)}
    finally:
        for run in runs:
            run.stop()


@pytest.mark.parametrize("scenario", FAILING, ids=lambda s: s.fixture_name[:-4])
def test_failure_is_visible(outcomes: dict[str, dict], scenario) -> None:  # type: ignore[no-untyped-def]
    result = outcomes[scenario.fixture_name[:-4]]
    for text in scenario.texts:
        assert text in result["log"], text
    assert scenarios.FIRED not in result["log"] or "crash_after_ready" in scenario.name
    if scenario.expect == "exit":
        assert not result["alive"]
        assert result["code"] == EXIT_CODES.get(scenario.fixture_name[:-4], -9)
    else:
        assert result["quiet"] and result["alive"], "a hang stays alive and says nothing"
        assert not result["listening"]
        assert "Traceback" not in result["log"]
