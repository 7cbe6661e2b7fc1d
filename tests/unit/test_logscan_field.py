"""The log reader on logs from the field, and the node's Python it has to run on.

Three parts, each scored on its own (scripts/field_score.py prints them and their misses):
- the corpus (tests/fixtures/corpus/{dev,test}): startup logs pasted into public SGLang and
  vLLM bug reports, split by thread before any rule changed; dev was tuned on, test is only
  measured;
- the field part (tests/fixtures/corpus/field): 66 logs labelled by another session, used as
  development data for issue 23 (rules changed while reading it);
- the blind part (tests/fixtures/blind): collected and labelled by a session that never read
  the rules, scored once with the rules frozen;
- the second blind part (tests/fixtures/blind2): collected the same way by another session;
  its score is main's rules' score of 2026-12-01, taken before anyone read its logs. Later
  changes read its misses, so from then on it is development data that only guards the floors.
The corpus test part and the field part carry issue 23's "must show" floors (97% verdicts,
90% failure reasons, 90% phases, no healthy, starting or stopped log called failed); the
blind parts carry floors set from their one frozen-rules score. docs/log-analysis.md gives
every part's measured score.
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


def _meets_floors(
    part: str, verdicts: float, reasons: float, phases: float, *, healthy_failed: int = 0
) -> None:
    result = _field_score().score(part)
    print(result.line())
    rates = result.rates()
    assert rates["verdicts"] >= verdicts, result.misses
    assert rates["reasons"] >= reasons, result.misses
    assert rates["phases"] >= phases, result.misses
    assert result.healthy_called_failed <= healthy_failed, result.misses


def test_the_corpus_test_part_meets_the_issue_floors() -> None:
    _meets_floors("test", verdicts=0.97, reasons=0.90, phases=0.90)


def test_the_field_development_part_meets_the_issue_floors() -> None:
    score = _field_score()
    assert len(score.labels("field")) == 66
    _meets_floors("field", verdicts=0.97, reasons=0.90, phases=0.90)


def test_the_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    # Scored once with the rules frozen at ed469b1, before any of its logs was read:
    # verdicts 65/73 (89%), reasons 31/37 (84%), phases 32/36 (89%), healthy called failed 0.
    # Each floor is that score less one log, so a rule change that costs one blind log more
    # than the frozen rules did fails here (docs/log-analysis.md, "Three more parts"). Fixes
    # made after that score, for defects it revealed, took it to 97% / 95% / 97%.
    score = _field_score()
    assert len(score.labels("blind")) == 73
    _meets_floors("blind", verdicts=64 / 73, reasons=30 / 37, phases=31 / 36)


def test_the_second_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    # Scored once with main's rules of 2026-12-01 (67bd5b4), before any of its logs was read:
    # verdicts 66/75 (88%), reasons 30/36 (83%), phases 34/39 (87%), healthy called failed 1
    # (a stopped server). Each floor is that score less one log; no healthy, starting or
    # stopped log may read failed. Changes made after that score read its misses
    # (docs/log-analysis.md, "Three more parts").
    score = _field_score()
    assert len(score.labels("blind2")) == 75
    _meets_floors("blind2", verdicts=65 / 75, reasons=29 / 36, phases=33 / 39)


def test_the_third_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    Scored blind with main's rules of 2026-12-01 afternoon (before any of its logs was read by
    a rule change): verdicts 73/79 (92%), reasons 29/34 (85%), phases 41/45 (91%), healthy
    called failed 1 (a stopped server's cut request traceback). Each floor is that score less
    one log. The target stays none called failed (the changes that read its misses reach 0);
    this floor asserts at most the frozen count, 1. Changes made after that score read its
    misses (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind3")) == 79
    _meets_floors("blind3", verdicts=72 / 79, reasons=28 / 34, phases=40 / 45, healthy_failed=1)


def test_the_fourth_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    Scored blind with main's rules of 2026-12-01 evening (before any of its logs was read by a
    rule change): verdicts 66/70 (94%), reasons 29/32 (91%), phases 35/38 (92%), healthy
    called failed 1 (a cut request traceback in SGLang's OpenAI route). Each floor is that
    score less one log. The target stays none called failed (the changes that read its misses
    reach 0); this floor asserts at most the frozen count, 1. Changes made after that score
    read its misses (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind4")) == 70
    _meets_floors("blind4", verdicts=65 / 70, reasons=28 / 32, phases=34 / 38, healthy_failed=1)


def test_the_fifth_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    Scored blind with main's rules of 2026-12-01 late evening (before any of its logs was read
    by a rule change): verdicts 53/60 (88%), reasons 16/23 (70%), phases 29/37 (78%), healthy
    called failed 1 (a serving framework's cut traceback in a streaming response's body). Each
    floor is that score less one log. The target stays none called failed (the changes that
    read its misses reach 0); this floor asserts at most the frozen count, 1. Changes made
    after that score read its misses (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind5")) == 60
    _meets_floors("blind5", verdicts=52 / 60, reasons=15 / 23, phases=28 / 37, healthy_failed=1)


def test_the_sixth_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    Logs from projects downstream of vLLM and SGLang, scored blind with main's rules of
    2026-12-01 night (before any of its logs was read by a rule change): verdicts 61/68 (90%),
    reasons 17/25 (68%), phases 38/43 (88%), healthy called failed 1 (a chat template's error
    traceback on a serving API server). Each floor is that score less one log. The target stays
    none called failed; this floor asserts at most the frozen count, 1. Changes made after that
    score read its misses (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind6")) == 68
    _meets_floors("blind6", verdicts=60 / 68, reasons=16 / 25, phases=37 / 43, healthy_failed=1)


def test_the_seventh_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; no healthy log called failed.

    Scored blind with main's rules of 2026-12-01 night (before any of its logs was read by a
    rule change): verdicts 64/68 (94%), reasons 25/27 (93%), phases 34/41 (83%; starting
    21/26), healthy called failed 0. Each floor is that score less one log. Changes made after
    that score read its misses (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind7")) == 68
    _meets_floors("blind7", verdicts=63 / 68, reasons=24 / 27, phases=33 / 41, healthy_failed=0)


def test_the_ninth_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    Scored blind with main's rules of 2026-12-01 night (4eb96a7, before any of its logs was
    read by a rule change): verdicts 66/72 (92%), reasons 21/27 (78%), phases 36/45 (80%;
    starting 19/24), healthy called failed 2. Each floor is that score less one log. The
    target stays none called failed; this floor asserts at most the frozen count, 2. Changes
    made after that score read its misses (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind9")) == 72
    _meets_floors("blind9", verdicts=65 / 72, reasons=20 / 27, phases=35 / 45, healthy_failed=2)


def test_the_tenth_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    41% SGLang, 11 of its failures an engine dying while serving, scored blind with main's rules
    of 2026-12-01 night (before any of its logs was read by a rule change): verdicts 50/63
    (79%), reasons 21/29 (72%), phases 27/34 (79%; starting 16/17), healthy called failed 1.
    Each floor is that score less one log. The target stays none called failed; this floor
    asserts at most the frozen count, 1. Changes made after that score read its misses
    (docs/log-analysis.md, "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind10")) == 63
    _meets_floors("blind10", verdicts=49 / 63, reasons=20 / 29, phases=26 / 34, healthy_failed=1)


def test_the_eleventh_blind_part_meets_the_floors_of_its_frozen_rules_score() -> None:
    """Floors at the frozen-rules score less one log; healthy called failed at most the frozen
    count.

    Whole logs committed to repositories (14 stopped on purpose), scored blind with main's
    rules of 2026-12-01 night (before any of its logs was read by a rule change): verdicts
    37/42 (88%), reasons 11/13 (85%), phases 29/29, healthy called failed 4. Each floor is that
    score less one log. The target stays none called failed; this floor asserts at most the
    frozen count, 4. Changes made after that score read its misses (docs/log-analysis.md,
    "Three more parts").
    """
    score = _field_score()
    assert len(score.labels("blind11")) == 42
    _meets_floors("blind11", verdicts=36 / 42, reasons=10 / 13, phases=28 / 29, healthy_failed=4)


def test_the_eighth_blind_part_meets_the_floors_of_its_last_rules_score() -> None:
    """Committed logs, pull requests and a page (60, healthy-heavy, 16 stopped), collected by a
    session that never read the rules. Scored by the lead with main's rules at session start
    (4b8fe08): verdicts 53/60 (88%), reasons 17/21, phases 35/39, healthy called failed 6;
    then with the session's final rules (after every round): 57/60 (95%), 17/21 (81%), 36/39
    (92%), healthy called failed 2. Its logs and misses were read by no rule-writer; its
    collector's prose description of its kinds (stops that print alarming lines, NUL holes,
    Slurm .out/.err) was given to one round (h23-fix9), which wrote rules from the engines'
    released code. Floors: the final score less one log; healthy called failed at most 2, the
    measured count (target 0).
    """
    score = _field_score()
    assert len(score.labels("blind8")) == 60
    _meets_floors("blind8", verdicts=56 / 60, reasons=16 / 21, phases=35 / 39, healthy_failed=2)


def test_the_twelfth_blind_part_meets_the_floors_of_its_last_rules_score() -> None:
    """59 logs from sources no other part drew from, collected by a session that never read
    the rules and described to no one. Scored by the lead at main d53ba15 (mid-session):
    verdicts 50/59 (85%), reasons 20/26 (77%), phases 29/33, healthy called failed 1; then
    with the session's final rules: 52/59 (88%), 22/26 (85%), 29/33 (88%), healthy called
    failed 1 — the session's last blind measurement. Floors: that score less one log; healthy
    called failed at most 1, the measured count (target 0).
    """
    score = _field_score()
    assert len(score.labels("blind12")) == 59
    _meets_floors("blind12", verdicts=51 / 59, reasons=21 / 26, phases=28 / 33, healthy_failed=1)


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
