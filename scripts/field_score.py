"""Score the log classifier on the field corpus (tests/fixtures/corpus/{dev,test}).

Each log is read the way `fab explain-log PATH --json` reads it and compared with its sidecar:
- verdicts: share of logs whose verdict matches;
- reasons: share of logs labelled failed whose reason matches;
- phases: share of logs whose phase matches (and, separately, of logs still starting);
- healthy called failed: logs labelled starting or ready that came out failed.

    .venv/bin/python scripts/field_score.py [dev|test|all] [--misses]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from firedup.ops.explain import explain_file

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "corpus"


@dataclass
class Score:
    part: str
    logs: int = 0
    verdicts: int = 0
    failed: int = 0
    reasons: int = 0
    phases: int = 0
    starting: int = 0
    starting_phases: int = 0
    healthy_called_failed: int = 0
    misses: list[str] = field(default_factory=list)

    def rates(self) -> dict[str, float]:
        return {
            "verdicts": self.verdicts / self.logs,
            "reasons": self.reasons / self.failed,
            "phases": self.phases / self.logs,
            "starting_phases": self.starting_phases / self.starting,
        }

    def line(self) -> str:
        rate = self.rates()
        return (
            f"{self.part}: {self.logs} logs; verdicts {self.verdicts}/{self.logs} "
            f"({rate['verdicts']:.0%}), reasons {self.reasons}/{self.failed} "
            f"({rate['reasons']:.0%}), phases {self.phases}/{self.logs} ({rate['phases']:.0%}; "
            f"starting {self.starting_phases}/{self.starting}, {rate['starting_phases']:.0%}), "
            f"healthy called failed {self.healthy_called_failed}"
        )


def score(part: str) -> Score:
    result = Score(part)
    for sidecar in sorted((CORPUS / part).glob("*.json")):
        expected = json.loads(sidecar.read_text())
        state = explain_file(sidecar.with_suffix(".log")).state
        got = (state.verdict.value, state.phase.value, state.reason.value if state.reason else None)
        want = (expected["verdict"], expected["phase"], expected["reason"])
        result.logs += 1
        result.verdicts += got[0] == want[0]
        result.phases += got[1] == want[1]
        if want[0] == "failed":
            result.failed += 1
            result.reasons += got[0] == "failed" and got[2] == want[2]
        if want[0] == "starting":
            result.starting += 1
            result.starting_phases += got[1] == want[1]
        if want[0] != "failed" and got[0] == "failed":
            result.healthy_called_failed += 1
        if got != want:
            result.misses.append(f"  {sidecar.stem}: got {got}, want {want}")
    return result


def threads(part: str) -> set[str]:
    """The bug-report threads a part's logs come from (a thread never spans both parts)."""
    return {
        json.loads(sidecar.read_text())["source"].split("#", 1)[0]
        for sidecar in (CORPUS / part).glob("*.json")
    }


def main(argv: list[str]) -> None:
    parts = [a for a in argv if not a.startswith("--")] or ["dev", "test"]
    parts = ["dev", "test"] if parts == ["all"] else parts
    for part in parts:
        result = score(part)
        print(result.line())
        if "--misses" in argv:
            print("\n".join(result.misses))


if __name__ == "__main__":
    main(sys.argv[1:])
