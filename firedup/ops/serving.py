"""What a server is doing, from its `/metrics` text (pure): requests, tokens/s, latencies.

`firedup.releases.prometheus.parse_samples` reads the Prometheus text format (the lines the
node kept, summed over label sets); `Serving.of` turns one sample into named numbers and,
given the previous sample of the same server, rates and latency quantiles over the interval
between them (like `top`: the first refresh has counters but no rates).
"""

from __future__ import annotations

import math
from typing import Any

from firedup.engine import Engine
from firedup.releases.metrics import NAMES, MetricNames
from firedup.releases.prometheus import Sample


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """The q-quantile of a cumulative histogram (linear inside a bucket, as PromQL does)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank, prev_bound, prev_count = q * buckets[bounds[-1]], 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            inside = (rank - prev_count) / (count - prev_count) if count > prev_count else 1.0
            return prev_bound + (bound - prev_bound) * inside
        prev_bound, prev_count = bound, count
    return None


def _delta(now: Sample, before: Sample | None, name: str) -> float | None:
    if name not in now.values:
        return None
    if before is None or name not in before.values:
        return now.values[name]
    return max(0.0, now.values[name] - before.values[name])


def _hist(now: Sample, before: Sample | None, name: str) -> dict[float, float]:
    hist = now.buckets.get(name, {})
    old = before.buckets.get(name, {}) if before is not None else {}
    return {b: c - old.get(b, 0.0) for b, c in hist.items()}


def _ratio(num: float | None, den: float | None) -> float | None:
    return round(num / den, 4) if num is not None and den else None


def _rate(now: Sample, before: Sample | None, name: str) -> float | None:
    if before is None or now.at <= before.at or name not in now.values:
        return None
    return round((_delta(now, before, name) or 0.0) / (now.at - before.at), 2)


def _spec(n: MetricNames, now: Sample, before: Sample | None) -> float | None:
    if not n.spec_drafts:  # SGLang: the accept length is a gauge (0 without speculation)
        value = now.values.get(n.spec_accepted)
        return round(value, 3) if value else None
    drafts = _delta(now, before, n.spec_drafts)
    accepted = _delta(now, before, n.spec_accepted)
    return round(1 + accepted / drafts, 3) if drafts and accepted is not None else None


def _prefix(n: MetricNames, now: Sample, before: Sample | None) -> float | None:
    if not n.prefix_queries:
        value = now.values.get(n.prefix_hits)
        return round(value, 4) if value is not None else None
    return _ratio(_delta(now, before, n.prefix_hits), _delta(now, before, n.prefix_queries))


def _q(hist: dict[float, float], q: float) -> float | None:
    value = quantile(hist, q)
    return round(value, 4) if value is not None else None


def serving(engine: Engine, now: Sample, before: Sample | None = None) -> dict[str, Any]:
    """The named numbers of `fab top` (docs/top.md); None where the engine did not say."""
    n = NAMES[engine]
    ttft, itl = _hist(now, before, n.ttft), _hist(now, before, n.itl)
    return {
        "requests_running": now.values.get(n.running),
        "requests_waiting": now.values.get(n.waiting),
        "requests_total": now.values.get(n.requests),
        "prompt_tokens_total": now.values.get(n.prompt_tokens),
        "generation_tokens_total": now.values.get(n.generation_tokens),
        "prompt_tokens_per_s": _rate(now, before, n.prompt_tokens),
        "generation_tokens_per_s": _rate(now, before, n.generation_tokens),
        "ttft_p50_s": _q(ttft, 0.5),
        "ttft_p95_s": _q(ttft, 0.95),
        "itl_p50_s": _q(itl, 0.5),
        "itl_p95_s": _q(itl, 0.95),
        "kv_cache_usage": now.values.get(n.kv_usage),
        "prefix_cache_hit_rate": _prefix(n, now, before),
        "spec_accept_length": _spec(n, now, before),
    }
