"""Score the log classifier on labelled field logs, one part at a time.

Parts (each scored on its own, never pooled):
- `dev`, `test`: tests/fixtures/corpus/{dev,test}, logs from public bug reports split by thread
  before any rule changed; each `<name>.log` has a `<name>.json` sidecar (verdict, phase,
  reason). dev was tuned on; test is only measured.
- `field`: tests/fixtures/corpus/field, 66 field logs labelled by another session
  (`labels.tsv`: file, engine, verdict, accept = the reasons, or for a starting log the phases,
  that are right). Development data: rules were changed while reading it.
- `blind`: tests/fixtures/blind, logs collected and labelled by a session that never read the
  rules, scored once with the rules frozen (docs/log-analysis.md says how it was kept blind).
  `blind2`: tests/fixtures/blind2, a second part collected the same way, scored once with
  main's rules of 2026-12-01; development data since. `blind3`: tests/fixtures/blind3, a third
  part collected the same way, scored with main's rules of 2026-12-01 afternoon; development
  data since. `blind4`: tests/fixtures/blind4, a fourth part collected the same way, scored
  with main's rules of 2026-12-01 evening; development data since. `blind5`: tests/fixtures/blind5,
  a fifth part collected the same way, scored with main's rules of 2026-12-01 late evening;
  development data since. `blind6`: tests/fixtures/blind6, a sixth part (logs from projects
  downstream of vLLM and SGLang: wrappers, RL stacks, model and hobby repos) collected the same
  way, scored with main's rules of 2026-12-01 night; development data since. `blind7`:
  tests/fixtures/blind7, a seventh part collected the same way, scored with main's rules of
  2026-12-01 night; development data since. `blind9`: tests/fixtures/blind9, a ninth part
  collected the same way, scored with main's rules of 2026-12-01 night; development data
  since. `blind10`: tests/fixtures/blind10, a tenth part collected the same way (41% SGLang,
  11 of its failures an engine dying while serving), scored with main's rules of 2026-12-01
  night; development data since. `blind11`: tests/fixtures/blind11, an eleventh part (whole
  logs committed to repositories, 14 stopped on purpose) collected the same way, scored with
  main's rules of 2026-12-01 night; development data since. `blind8` (60 logs: committed
  files, pull requests, a page; healthy-heavy, 16 stopped) and `blind12` (59 logs from
  sources no other part drew from): collected the same way and scored by the lead with the
  session's final rules, their misses read by no one who changed a rule (blind8's kinds were
  described in prose to one rule round, h23-fix9; blind12 was described to no one). Either
  label format is read.

Each log is read the way `fab explain-log PATH --json` reads it:
- verdicts: share of logs whose verdict matches;
- reasons: share of logs labelled failed read failed with an accepted reason;
- phases: share of logs with a phase label whose phase is accepted (a ready log's phase is
  `ready`; a failed log has a phase label only in the sidecar format);
- healthy called failed: logs labelled starting, ready or stopped that came out failed.

    .venv/bin/python scripts/field_score.py [PART ...|all] [--misses]   (PART: a key of PARTS)
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from firedup.logscan import ScanState
from firedup.ops.explain import explain_file

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
CORPUS = FIXTURES / "corpus"
PARTS = {
    "dev": CORPUS / "dev",
    "test": CORPUS / "test",
    "field": CORPUS / "field",
    "blind": FIXTURES / "blind",
    "blind2": FIXTURES / "blind2",
    "blind3": FIXTURES / "blind3",
    "blind4": FIXTURES / "blind4",
    "blind5": FIXTURES / "blind5",
    "blind6": FIXTURES / "blind6",
    "blind7": FIXTURES / "blind7",
    "blind9": FIXTURES / "blind9",
    "blind10": FIXTURES / "blind10",
    "blind11": FIXTURES / "blind11",
    "blind8": FIXTURES / "blind8",
    "blind12": FIXTURES / "blind12",
}


@dataclass(frozen=True)
class Label:
    log: Path
    verdict: str
    reasons: frozenset[str] = frozenset()  # accepted reasons of a failed log
    phases: frozenset[str] = frozenset()  # accepted phases; empty: the phase is not labelled


@dataclass
class Score:
    part: str
    logs: int = 0
    verdicts: int = 0
    failed: int = 0
    reasons: int = 0
    phased: int = 0
    phases: int = 0
    starting: int = 0
    starting_phases: int = 0
    healthy_called_failed: int = 0
    misses: list[str] = field(default_factory=list)

    def rates(self) -> dict[str, float]:
        return {
            "verdicts": self.verdicts / max(self.logs, 1),
            "reasons": self.reasons / max(self.failed, 1),
            "phases": self.phases / max(self.phased, 1),
            "starting_phases": self.starting_phases / max(self.starting, 1),
        }

    def line(self) -> str:
        rate = self.rates()
        return (
            f"{self.part}: {self.logs} logs; verdicts {self.verdicts}/{self.logs} "
            f"({rate['verdicts']:.0%}), reasons {self.reasons}/{self.failed} "
            f"({rate['reasons']:.0%}), phases {self.phases}/{self.phased} ({rate['phases']:.0%}; "
            f"starting {self.starting_phases}/{self.starting}, {rate['starting_phases']:.0%}), "
            f"healthy called failed {self.healthy_called_failed}"
        )


def _accepted(value: object) -> frozenset[str]:
    if value is None:
        return frozenset()
    items = value if isinstance(value, list) else str(value).replace(";", ",").split(",")
    return frozenset(str(item).strip() for item in items if str(item).strip())


def _from_tsv(table: Path) -> list[Label]:
    labels = []
    with table.open(newline="") as rows:
        for row in csv.DictReader(rows, delimiter="\t"):
            verdict = row["verdict"].strip()
            accept = _accepted(row.get("accept") or row.get("phase_or_reason"))
            log = table.parent / row["file"].strip()
            if verdict == "failed":
                labels.append(Label(log, verdict, reasons=accept))
            elif verdict == "ready":
                labels.append(Label(log, verdict, phases=frozenset({"ready"})))
            else:
                labels.append(Label(log, verdict, phases=accept))
    return labels


def _from_sidecar(sidecar: Path) -> Label | None:
    if sidecar.name.endswith(".expected.json"):
        log = sidecar.with_name(sidecar.name[: -len(".expected.json")] + ".log")
    else:
        log = sidecar.with_suffix(".log")
    if not log.exists():
        return None
    data = json.loads(sidecar.read_text())
    verdict = data["verdict"]
    reasons = _accepted(data.get("reasons") or data.get("reason"))
    phases = _accepted(data.get("phases") or data.get("phase"))
    if verdict == "failed" and not reasons:
        reasons = _accepted(data.get("accept"))
    elif verdict != "failed" and not phases:
        phases = _accepted(data.get("accept"))
    if verdict == "ready":
        phases = phases or frozenset({"ready"})
    return Label(log, verdict, reasons, phases)


def labels(part: str) -> list[Label]:
    folder = PARTS[part]
    tables = sorted(folder.rglob("labels.tsv"))
    if tables:
        return [label for table in tables for label in _from_tsv(table)]
    found = (_from_sidecar(sidecar) for sidecar in sorted(folder.rglob("*.json")))
    return [label for label in found if label is not None]


@dataclass(frozen=True)
class Judgement:
    """One log's reading against its label, each axis as the part's score counts it."""

    got: tuple[str, str, str | None]  # verdict, phase, reason
    verdict: bool
    phase: bool | None  # None: the label gives no phase
    reason: bool | None  # None: the label is not failed
    healthy_called_failed: bool

    @property
    def right(self) -> bool:
        return self.verdict and self.phase is not False and self.reason is not False


def judge(label: Label, state: ScanState) -> Judgement:
    got = (state.verdict.value, state.phase.value, state.reason.value if state.reason else None)
    # A stopped log was starting or ready when the stop came: anything but failed is right.
    verdict = got[0] != "failed" if label.verdict == "stopped" else got[0] == label.verdict
    phase = got[1] in label.phases if label.phases else None
    reason = None
    if label.verdict == "failed":
        reason = got[0] == "failed" and got[2] in label.reasons
    healthy_called_failed = label.verdict != "failed" and got[0] == "failed"
    return Judgement(got, verdict, phase, reason, healthy_called_failed)


def score(part: str) -> Score:
    result = Score(part)
    for label in labels(part):
        verdict = judge(label, explain_file(label.log).state)
        result.logs += 1
        result.verdicts += verdict.verdict
        if verdict.phase is not None:
            result.phased += 1
            result.phases += verdict.phase
        if verdict.reason is not None:
            result.failed += 1
            result.reasons += verdict.reason
        elif label.verdict == "starting":
            result.starting += 1
            result.starting_phases += bool(verdict.phase)
        result.healthy_called_failed += verdict.healthy_called_failed
        if not verdict.right:
            want = (label.verdict, sorted(label.phases), sorted(label.reasons))
            result.misses.append(f"  {label.log.stem}: got {verdict.got}, want {want}")
    return result


def threads(part: str) -> set[str]:
    """The bug-report threads a part's logs come from (a thread never spans dev and test)."""
    return {
        json.loads(sidecar.read_text())["source"].split("#", 1)[0]
        for sidecar in PARTS[part].glob("*.json")
    }


def main(argv: list[str]) -> None:
    parts = [a for a in argv if not a.startswith("--")] or ["dev", "test", "field"]
    parts = [p for p in PARTS if PARTS[p].is_dir()] if parts == ["all"] else parts
    for part in parts:
        result = score(part)
        print(result.line())
        if "--misses" in argv:
            print("\n".join(result.misses))


if __name__ == "__main__":
    main(sys.argv[1:])
