"""The reader reads a log the same way however it was collected, pasted or cut.

Every labelled log of every scored part (corpus test, field, blind .. blind5) goes through
the label-preserving transforms of tests/logmorph.py (collector prefixes of several kinds and
nestings, docker's json-file records, journalctl's formats, torchrun's tags, Markdown quotes,
HTML entities, a JSON-dumped or glued log, a stamp after the message, hard wraps, CRLF,
colour, tabs, trailing spaces, noise lines, `\\r` bars, Windows paths, the head cut off).
Wherever the reader got the original's verdict, reason or phase right (judged by
scripts/field_score.py's `judge`, the parts' own score), it must get the transformed log's
right too; and no healthy, starting or stopped log may come out failed, transformed or not.

To stay a few seconds, the suite applies each transform to a fixed half of the ~480 logs
(`sampled`: a hash of the transform's and the log's names, so each log meets about half the
transforms and the same half every run); the cuts run on every log. KNOWN_BREAKS counts that
sample. `python -m` runs every transform on every log and prints both counts:

    .venv/bin/python -m tests.unit.test_logscan_metamorphic   # what breaks, per transform
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import pytest

from firedup.engine import Engine
from firedup.logscan import EventKind, LogScanner, explain
from tests import logmorph
from tests.unit.test_logscan_field import _field_score

PARTS = ("test", "field", "blind", "blind2", "blind3", "blind4", "blind5")
TRANSFORMS = {**logmorph.WRAPPERS, **logmorph.TEXT}
# vLLM's own process tags name the engine: they go only on logs already read as vLLM's.
VLLM_TRANSFORMS = logmorph.VLLM_WRAPPERS
SCORE = lru_cache(maxsize=1)(_field_score)
SAMPLE = 2  # each transform meets one log in SAMPLE in the suite
# Logs a transform still breaks (of the ~195 it is applied to): a ratchet, lowered as the
# reader learns, never raised. Everything not named here breaks nothing. The misses are
# printed by `python -m tests.unit.test_logscan_metamorphic`; docs/log-analysis.md says what
# is left and why.
KNOWN_BREAKS = {
    # wrappers whose every line differs only in numbers, or a one-line log: nothing to learn
    "torchserve": 4,
    "compose+torchserve": 4,
    "srun+rank": 4,
    "elastic_default": 5,
    # hard wraps: unwrap.py joins them once it has learned the width (the first ones pass)
    "wrap80": 6,
    "compose+wrap100": 1,
    "wrap80_indented": 10,
    "trailing": 1,  # blind3's quoted console: a viewer's column read as a wrapper's end
    "json_dumped": 8,  # a dumped piece under 200 characters is not searched for lines
    "stamp_after": 1,  # vLLM's launch banner behind a logger's name no longer starts a launch
    "glued": 11,  # lines with no traceback in them glued (`... # CPU blocks: 327 Killed`)
    "cut_half": 5,
    "cut_to_evidence": 18,
}


@dataclass(frozen=True)
class Case:
    name: str
    label: Any  # field_score.Label
    data: bytes
    year: int
    original: Any  # field_score.Judgement
    vllm: bool  # the reader reads the original as vLLM's

    def transforms(self) -> dict[str, logmorph.Transform]:
        return {**TRANSFORMS, **VLLM_TRANSFORMS} if self.vllm else TRANSFORMS

    def sampled(self, transform: str) -> bool:
        return zlib.crc32(f"{transform}/{self.name}".encode()) % SAMPLE == 0


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    score = SCORE()
    found = []
    for part in PARTS:
        for label in score.labels(part):
            data = label.log.read_bytes()
            year = datetime.fromtimestamp(label.log.stat().st_mtime).year
            state = explain(data, year=year)
            vllm = state.engine is Engine.VLLM
            judged = score.judge(label, state)
            found.append(Case(f"{part}/{label.log.stem}", label, data, year, judged, vllm))
    return tuple(found)


def evidence_line(case: Case) -> int:
    """The first line of the log's evidence: the line that set its last phase and, for a
    failure, the first line of the excerpt that proves it (cutting before it keeps what a
    human reads)."""
    scanner = LogScanner(year=case.year)
    events = [*scanner.feed(case.data), *scanner.finish()]
    final = scanner.state
    lines = case.data.decode("utf-8", "replace").split("\n")
    proofs = [e.text for e in events if e.kind is EventKind.PHASE and e.phase is final.phase]
    if final.excerpt:
        proofs += [final.excerpt[0], final.excerpt[-1]]
    evidence = len(lines)
    for proof in proofs:
        needle = proof.strip()[:60]
        found = [i for i, line in enumerate(lines) if needle in line]
        evidence = min(evidence, found[-1] if found else 0)
    return evidence


def broken(case: Case, transformed: bytes) -> str | None:
    """What the transform broke that the original had right, or None."""
    judged = SCORE().judge(case.label, explain(transformed, year=case.year))
    before = case.original
    lost = [
        axis
        for axis in ("verdict", "phase", "reason")
        if getattr(before, axis) and not getattr(judged, axis)
    ]
    if judged.healthy_called_failed:
        lost.append("healthy called failed")
    if not lost:
        return None
    return f"{case.name}: {'/'.join(lost)} {before.got} -> {judged.got}"


def cut_transforms(case: Case) -> Iterator[tuple[str, bytes]]:
    """The log pasted from its middle: half, then all, of what precedes the evidence cut off.
    The second is harsh (a traceback cut to the excerpt's lines may no longer say it is one)."""
    evidence = evidence_line(case)
    for name, lines in (("cut_half", evidence // 2), ("cut_to_evidence", evidence)):
        if lines > 0:
            yield name, logmorph.cut_head(lines)(case.data)


def breaks() -> dict[str, list[tuple[bool, str]]]:
    """Every transform on every log: (in the suite's sample, what broke)."""
    names = (*TRANSFORMS, *VLLM_TRANSFORMS, "cut_half", "cut_to_evidence")
    found: dict[str, list[tuple[bool, str]]] = {name: [] for name in names}
    for case in cases():
        for name, transform in case.transforms().items():
            problem = broken(case, transform(case.data))
            if problem:
                found[name].append((case.sampled(name), problem))
        for name, data in cut_transforms(case):
            problem = broken(case, data)
            if problem:
                found[name].append((True, problem))
    return found


def test_the_parts_are_all_read() -> None:
    assert {case.name.split("/")[0] for case in cases()} == set(PARTS)
    assert len(cases()) >= 470
    assert sum(case.label.verdict == "failed" for case in cases()) >= 220
    for name in {**TRANSFORMS, **VLLM_TRANSFORMS}:
        meets = [case for case in cases() if name in case.transforms()]
        sample = [case for case in meets if case.sampled(name)]
        assert len(sample) * (SAMPLE + 1) >= len(meets), name  # about one in SAMPLE


@pytest.mark.parametrize("name", sorted({**TRANSFORMS, **VLLM_TRANSFORMS}))
def test_a_transformed_log_reads_as_the_original(name: str) -> None:
    problems = [
        problem
        for case in cases()
        if name in case.transforms()
        and case.sampled(name)
        and (problem := broken(case, case.transforms()[name](case.data)))
    ]
    assert len(problems) <= KNOWN_BREAKS.get(name, 0), "\n".join(problems)


def test_a_log_pasted_from_its_middle_reads_as_the_original() -> None:
    problems = [
        (name, problem)
        for case in cases()
        for name, data in cut_transforms(case)
        if (problem := broken(case, data))
    ]
    for name in ("cut_half", "cut_to_evidence"):
        named = [problem for cut, problem in problems if cut == name]
        assert len(named) <= KNOWN_BREAKS[name], "\n".join(named)


def test_the_transforms_keep_every_line_and_change_it() -> None:
    bars = b"Loading:  10%|#  | 1/10 [00:01<00:09]\nLoading:  20%|## | 2/10 [00:02<00:08]\n"
    log = b"INFO 05-01 10:00:00 [api_server.py:1] hello " + b"x" * 130 + b'\n  File "/x.py"\n'
    log += bars
    for name, transform in {**TRANSFORMS, **VLLM_TRANSFORMS}.items():
        out = transform(log)
        assert out != log, name
        assert b"hello" in out, name
    assert logmorph.hard_wrap(10)(b"0123456789abcdef\n") == b"0123456789\nabcdef\n"
    assert logmorph.cut_head(1)(log) == b'  File "/x.py"\n' + bars
    assert logmorph.cr_bars(bars) == bars.replace(b"]\nL", b"]\rL")
    assert logmorph.windows_paths(b'  File "/x/y.py"\n') == b'  File "C:\\x\\y.py"\n'
    noisy = logmorph.noise(every=1)(b"a line\nTraceback (most recent call last):\n  File\nb\n")
    assert b"Traceback (most recent call last):\n  File\nb\n" in noisy  # never inside one


if __name__ == "__main__":
    for transform, problems in breaks().items():
        sampled = sum(in_sample for in_sample, _ in problems)
        print(f"{transform}: {len(problems)} (in the suite's sample: {sampled})")
        for in_sample, problem in problems:
            print(f"  {'*' if in_sample else ' '} {problem}")
