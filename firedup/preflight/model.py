"""Preflight values: what one check found, and the report of all of them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    hint: str | None = None


def passed(name: str, detail: str, hint: str | None = None) -> Check:
    return Check(name, Outcome.PASS, detail, hint)


def warned(name: str, detail: str, hint: str | None = None) -> Check:
    return Check(name, Outcome.WARN, detail, hint)


def failed(name: str, detail: str, hint: str | None = None) -> Check:
    return Check(name, Outcome.FAIL, detail, hint)


@dataclass(frozen=True)
class PreflightReport:
    host: str
    checks: tuple[Check, ...]
    engine_version: str | None = None  # as the node's python reported it
    gpus: tuple[int, ...] | None = None  # the GPUs the launch uses, chosen from the facts
    gpus_why: str = ""

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.outcome is Outcome.FAIL)

    @property
    def ok(self) -> bool:
        return not self.failures

    def text(self) -> str:
        """A table, then the hints, numbered to their rows."""
        width = max((len(c.name) for c in self.checks), default=5)
        rows: list[str] = []
        hints: list[str] = []
        for check in self.checks:
            mark = ""
            if check.hint:
                hints.append(f"  [{len(hints) + 1}] {check.name}: {check.hint}")
                mark = f" [{len(hints)}]"
            rows.append(
                f"  {check.outcome.value.upper():4}  {check.name:{width}}  {check.detail}{mark}"
            )
        return "\n".join([f"preflight {self.host}:", *rows, *(["hints:", *hints] if hints else [])])
