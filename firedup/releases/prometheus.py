"""The Prometheus text format as the engines serve it on /metrics (pure): each sample summed
over its label sets, histograms as cumulative buckets. Read by `fab top` (ops/serving.py) and
by a router's drain (router/drain.py)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LE = re.compile(r'le="([^"]+)"')


@dataclass(frozen=True)
class Sample:
    at: float  # the node's clock
    values: dict[str, float]  # name -> sum over label sets
    buckets: dict[str, dict[float, float]]  # histogram name -> le -> cumulative count


def parse_samples(text: str, at: float) -> Sample:
    values: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        name, labels, raw = match.groups()
        try:
            value = float(raw)
        except ValueError:
            continue
        if name.endswith("_bucket"):
            le = _LE.search(labels or "")
            if le:
                bound = math.inf if le.group(1) == "+Inf" else float(le.group(1))
                hist = buckets.setdefault(name[: -len("_bucket")], {})
                hist[bound] = hist.get(bound, 0.0) + value
            continue
        values[name] = values.get(name, 0.0) + value
    return Sample(at, values, buckets)
