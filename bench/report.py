"""Medians, ratios and the report files (report.json with every sample, report.md to read)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None, unit: str = "s", digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}{unit}"


def ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or base <= 0:
        return "—"
    return f"{value / base:.1f}x"


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def latency_summary(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in samples:
        groups.setdefault((s["case"], s["tool"]), []).append(s)
    out = []
    for (case, tool), runs in groups.items():
        lat = [r["latency_s"] for r in runs]
        outcomes = sorted({r["outcome"] for r in runs})
        out.append(
            {
                "case": case,
                "tool": tool,
                "runs": len(runs),
                "median_s": median(lat),
                "min_s": min((x for x in lat if x is not None), default=None),
                "max_s": max((x for x in lat if x is not None), default=None),
                "never_reported": sum(1 for x in lat if x is None),
                "outcomes": outcomes,
                "median_window_s": median(r["window_s"] for r in runs),
                "median_node_cpu_pct": median(
                    100 * r["node_cpu_s"] / r["window_s"] for r in runs if r["window_s"] > 0
                ),
            }
        )
    return out


def write_reports(out_dir: Path, results: dict[str, Any], markdown: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (out_dir / "report.md").write_text(markdown)
