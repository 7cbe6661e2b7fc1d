"""The engines' Prometheus metric names that `fab top` reads, per engine, from the real wheels.

Read off the released code (`pip download --no-deps`, docs/top.md says how to re-check):
vLLM 0.32.0 `vllm/v1/metrics/loggers.py` and `vllm/v1/spec_decode/metrics.py` (the same
names since the v1 engine became the default, 0.8 onwards), SGLang 0.5.23
`sglang/srt/observability/metrics_collector.py` (the same names since 0.4). prometheus_client
exports a Counter named `x` as `x_total`; the names below are as exported.
"""

from __future__ import annotations

from dataclasses import dataclass

from firedup.engine import Engine


@dataclass(frozen=True)
class MetricNames:
    running: str
    waiting: str
    requests: str  # counter: requests finished
    prompt_tokens: str  # counter
    generation_tokens: str  # counter
    ttft: str  # histogram (seconds)
    itl: str  # histogram (seconds)
    kv_usage: str  # gauge, 0..1
    prefix_hits: str  # vLLM: counter of hit tokens; SGLang: a gauge rate (cache_hit_rate)
    prefix_queries: str  # vLLM: counter of queried tokens; SGLang: "" (the gauge is the rate)
    spec_drafts: str  # vLLM: counter; SGLang: "" (spec_accept_length is a gauge)
    spec_accepted: str  # vLLM: counter of accepted tokens; SGLang: the accept-length gauge


NAMES = {
    Engine.VLLM: MetricNames(
        running="vllm:num_requests_running",
        waiting="vllm:num_requests_waiting",
        requests="vllm:request_success_total",
        prompt_tokens="vllm:prompt_tokens_total",
        generation_tokens="vllm:generation_tokens_total",
        ttft="vllm:time_to_first_token_seconds",
        itl="vllm:inter_token_latency_seconds",
        kv_usage="vllm:kv_cache_usage_perc",
        prefix_hits="vllm:prefix_cache_hits_total",
        prefix_queries="vllm:prefix_cache_queries_total",
        spec_drafts="vllm:spec_decode_num_drafts_total",
        spec_accepted="vllm:spec_decode_num_accepted_tokens_total",
    ),
    Engine.SGLANG: MetricNames(
        running="sglang:num_running_reqs",
        waiting="sglang:num_queue_reqs",
        requests="sglang:num_requests_total",
        prompt_tokens="sglang:prompt_tokens_total",
        generation_tokens="sglang:generation_tokens_total",
        ttft="sglang:time_to_first_token_seconds",
        itl="sglang:inter_token_latency_seconds",
        kv_usage="sglang:token_usage",
        prefix_hits="sglang:cache_hit_rate",
        prefix_queries="",
        spec_drafts="",
        spec_accepted="sglang:spec_accept_length",
    ),
}
