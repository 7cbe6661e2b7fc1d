"""The three launches of the story on the simulated node, plus where each hook is called."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.sim.simhelp import listening, scenarios, simrun

KIMI_PY = Path("sglang/srt/models/kimi_k25.py")


def _lines(run) -> list[str]:  # type: ignore[no-untyped-def]
    return run.log().replace("\r", "\n").splitlines()


def _first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


def test_launch_without_override_fails_before_loading(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(scenarios.by_name("sglang", "kimi-eagle3-ctxlen-explicit"))
    assert run.wait_exit(30) == -9  # kill_process_tree SIGKILLs the launcher: shell sees 137
    lines = _lines(run)
    assert "Load weight begin" not in run.log()
    error = _first(lines, "ValueError: Warning: Target model's context_length (262144)")
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in lines[error]
    assert any(
        line.startswith("[") and " TP" in line and "Scheduler hit an exception" in line
        for line in lines
    )
    assert scenarios.SIGQUIT in run.log()
    assert [e["event"] for e in run.events()] == ["crashed"]


def test_without_context_length_the_draft_fails_after_target_capture(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(scenarios.by_name("sglang", "kimi-eagle3-ctxlen-derived"))
    assert run.wait_exit(30) == -9
    lines = _lines(run)
    assert _first(lines, "Capture cuda graph end") < _first(lines, "ValueError: Warning: Target")


def test_override_without_patch_dies_on_the_missing_hook(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(scenarios.by_name("sglang", "kimi-eagle3-attributeerror"))
    assert run.wait_exit(30) == -9
    lines = _lines(run)
    begin = _first(lines, "] Capture cuda graph begin.")
    error = _first(
        lines,
        "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute "
        "'set_eagle3_layers_to_capture'",
    )
    assert begin < error
    assert "Capturing batches" not in run.log()  # dies before the bar
    assert any('cuda_graph_runner.py", line' in line for line in lines[error - 4 : error])
    assert scenarios.SIGQUIT in run.log()
    assert not listening(run.port)


def test_override_and_patch_gets_ready_after_draft_capture(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(scenarios.by_name("sglang", "kimi-eagle3-ready"))
    assert run.wait_text("Capture draft cuda graph begin", 30)
    assert not listening(run.port)  # loading and capture: nothing listens yet
    assert run.wait_text(scenarios.FIRED, 30)
    assert run.wait_for(lambda: run.http_status("/health") == 200, 10)
    lines = _lines(run)
    draft_bar = [line for line in lines if line.startswith("Capturing batches (bs=48")]
    assert any(" 0/23 [00:00<?, ?it/s]" in line for line in draft_bar)
    assert _first(lines, "Capture draft extend cuda graph end") < _first(lines, "Uvicorn running")
    assert '"POST /v1/chat/completions HTTP/1.1" 200 OK' in run.log()  # VLM warmup path
    assert run.wait_text("accept len:", 15)  # decode stats of speculative decoding
    patched = run.workdir / "python-patched"
    assert (patched / KIMI_PY.parent / "__pycache__").is_dir()  # imported normally: real .pyc


def test_get_embed_and_head_is_called_after_the_draft_load(launch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = scenarios.by_name("sglang", "kimi-eagle3-ready")
    run = launch(scenario)  # only to build a patched tree we can then cut down
    run.wait_exit(0.1)
    partial = tmp_path / "partial"
    patched = simrun.patched_python(run.workdir)
    shutil.copytree(patched, partial, ignore=shutil.ignore_patterns("__pycache__"))
    source = (partial / KIMI_PY).read_text()
    cut = source.index("    def get_embed_and_head")
    end = source.index("\nEntryClass")
    (partial / KIMI_PY).write_text(source[:cut] + source[end:])
    run.stop()
    half = scenarios.Scenario("half-patched", "sglang", scenario.args, "exit", env=scenario.env)
    run = launch(half)
    run.stop()  # restart it on the half-patched tree
    run.env["PYTHONPATH"] = str(partial)
    run.start()
    assert run.wait_exit(30) == -9
    lines = _lines(run)
    draft_loaded = _first(lines, "type=LlamaForCausalLMEagle3")
    error = _first(lines, "object has no attribute 'get_embed_and_head'")
    assert draft_loaded < error
    assert "Capture draft cuda graph begin" not in run.log()
