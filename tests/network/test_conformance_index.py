"""Re-derive the committed conformance facts from the package index (needs the network).

Downloads one small SGLang wheel and re-reads it with the conformance tool; skips with the
reason when the index cannot be reached. `scripts/conformance.py` re-reads the whole matrix.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from firedup.releases.conformance import load

pytestmark = pytest.mark.network
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "conformance.py"


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("conformance_tool", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", ["0.5.9"])
def test_a_release_read_again_from_the_index_matches_the_committed_facts(
    version: str, tmp_path: Path
) -> None:
    tool = _tool()
    try:
        wheel = tool.download("sglang", version, tmp_path)
    except (subprocess.CalledProcessError, RuntimeError, OSError) as exc:
        pytest.skip(f"package index unreachable: {exc}")
    fresh = tool.compact({"sglang": {version: tool.read_release("sglang", version, wheel)}})
    committed = load()["sglang"]
    assert fresh["sglang"]["releases"][version] == committed["releases"][version]
    accepted = {f for f, spans in committed["flags"].items() if _covers(spans, version)}
    assert set(fresh["sglang"]["flags"]) == accepted


def _covers(spans: str, version: str) -> bool:
    from firedup.releases.conformance import _v
    from firedup.releases.conformance import spans as parse

    return any(_v(a) <= _v(version) <= _v(b) for a, b in parse(spans))


def _index_versions(name: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next((ln for ln in done.stdout.splitlines() if "Available versions:" in ln), "")
    if done.returncode != 0 or not line:
        pytest.skip(f"package index unreachable: {done.stderr.strip()[-200:]}")
    return [v.strip() for v in line.split(":", 1)[1].split(",")]


def test_the_matrix_has_every_sglang_release_since_0_5_17_and_every_vllm_minor_since_0_26() -> None:
    from firedup.releases.conformance import MATRIX, _v

    sglang = [v for v in _index_versions("sglang") if _v(v) >= _v("0.5.17")]
    assert sorted(set(sglang) - set(MATRIX["sglang"]), key=_v) == []
    minors = {".".join(v.split(".")[:2]) for v in _index_versions("vllm") if _v(v) >= _v("0.26")}
    covered = {".".join(v.split(".")[:2]) for v in MATRIX["vllm"]}
    assert sorted(minors - covered) == []
