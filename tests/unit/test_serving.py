"""`/metrics` text to `fab top`'s numbers (pure), on text shaped like the real engines'."""

from __future__ import annotations

from firedup.engine import Engine
from firedup.ops.serving import quantile, serving
from firedup.ops.top import TopRow
from firedup.releases.prometheus import parse_samples
from tasks.top import fit_columns

VLLM = """
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:prompt_tokens_total{engine="0",model_name="m"} {prompt}
vllm:generation_tokens_total{engine="0",model_name="m"} {gen}
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} {fast}
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
"""


def _text(prompt: float, gen: float, fast: float) -> str:
    return (
        VLLM.replace("{prompt}", str(prompt))
        .replace("{gen}", str(gen))
        .replace("{fast}", str(fast))
    )


def test_counters_sum_over_label_sets_and_rates_need_two_samples() -> None:
    first = parse_samples(_text(10, 100, 2), at=100.0)
    once = serving(Engine.VLLM, first)
    assert once["requests_total"] == 4 and once["requests_running"] == 2
    assert once["generation_tokens_per_s"] is None  # one sample: no rate yet
    later = serving(Engine.VLLM, parse_samples(_text(30, 300, 2), at=102.0), first)
    assert later["prompt_tokens_per_s"] == 10 and later["generation_tokens_per_s"] == 100
    assert later["kv_cache_usage"] == 0.25


def test_quantiles_are_read_inside_the_bucket_like_promql() -> None:
    buckets = {0.1: 2.0, 1.0: 4.0, float("inf"): 4.0}
    assert quantile(buckets, 0.5) == 0.1
    assert abs((quantile(buckets, 0.75) or 0) - 0.55) < 1e-9
    assert quantile({}, 0.5) is None


def test_columns_are_left_out_by_priority_to_fit_the_width() -> None:
    rows = [TopRow("a-long-host-name", "ready", "ready", metrics={"requests_running": 1.0})]
    narrow, wide = fit_columns(rows, 60), fit_columns(rows, 200)
    assert len(narrow) < len(wide) == 11
    assert {0, 1, 2} <= set(narrow)
