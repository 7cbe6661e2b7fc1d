"""The log reader on logs from the field, and the node's Python it has to run on.

The corpus (tests/fixtures/corpus) holds startup logs pasted into public SGLang and vLLM bug
reports, each with its source link and labels. Its dev part is what the rules were tuned on;
its test part is only measured. The floors below are issue 15's; scripts/field_score.py
prints both parts' scores and the misses.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGSCAN = ROOT / "firedup" / "logscan"


def _field_score() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "field_score", ROOT / "scripts" / "field_score.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_corpus_is_large_and_split_by_thread() -> None:
    score = _field_score()
    dev, test = score.score("dev"), score.score("test")
    assert dev.logs + test.logs >= 150
    assert test.logs * 3 >= dev.logs + test.logs
    threads = {part: score.threads(part) for part in ("dev", "test")}
    assert not threads["dev"] & threads["test"]


def test_the_test_part_meets_the_issue_floors() -> None:
    result = _field_score().score("test")
    print(result.line())
    rates = result.rates()
    assert rates["verdicts"] >= 0.95, result.misses
    assert rates["reasons"] >= 0.90, result.misses
    assert rates["phases"] >= 0.85, result.misses
    assert result.healthy_called_failed == 0, result.misses


@pytest.mark.parametrize("module", sorted(LOGSCAN.glob("*.py")), ids=lambda p: p.name)
def test_every_logscan_module_is_python_3_8_syntax(module: Path) -> None:
    ast.parse(module.read_text(), filename=str(module), feature_version=(3, 8))


def test_logscan_imports_with_the_standard_library_alone(tmp_path: Path) -> None:
    # What the node gets: the package, the engine enum it names, and nothing installed.
    package = tmp_path / "firedup"
    shutil.copytree(LOGSCAN, package / "logscan", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "firedup" / "engine.py", package / "engine.py")
    (package / "__init__.py").write_text("")
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); from firedup.logscan import explain; "
        "state = explain(b'[2026-01-01 00:00:00] The server is fired up and ready to roll!\\n'); "
        "assert state.verdict.value == 'ready'; "
        "assert not [m for m in sys.modules if m.split('.')[0] in {'pydantic', 'yaml', 'fabric'}]"
    )
    # -I -S: no site-packages, no user site, no environment; only the copy above.
    subprocess.run([sys.executable, "-I", "-S", "-c", script], cwd=tmp_path, check=True)


def test_every_failure_in_the_corpus_is_explained() -> None:
    from firedup.ops.explain import explain_file

    for log in sorted((ROOT / "tests" / "fixtures" / "corpus").glob("*/*.log")):
        state = explain_file(log).state
        if state.verdict.value == "failed":
            assert state.hint and 1 <= len(state.excerpt) <= 9, log.name
            assert all(line.strip() for line in state.excerpt), (log.name, state.excerpt)
