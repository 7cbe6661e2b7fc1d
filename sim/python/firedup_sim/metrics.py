"""`/metrics` of the simulated engines: the real names, numbers that move with requests served.

Names and kinds as the real releases define them (prometheus_client; a Counter is exported
with `_total`): vLLM 0.32 `vllm/v1/metrics/loggers.py`, SGLang 0.5.23
`sglang/srt/observability/metrics_collector.py` (firedup/releases/metrics.py lists them).
Only what firedup reads is simulated; the label sets are the real ones' shape.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

# The real engines' default latency buckets (a subset is enough to read quantiles from).
BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += times
        self.count += times
        self.sum += value * times

    def lines(self, name: str, labels: str) -> list[str]:
        pairs = zip(BUCKETS, self.counts, strict=True)
        out = [f'{name}_bucket{{{labels},le="{b}"}} {c}.0' for b, c in pairs]
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.count}.0')
        out.append(f"{name}_count{{{labels}}} {self.count}.0")
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        return out


class Metrics:
    """Counters and gauges of one server, updated by its request handlers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.requests = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.drafts = 0
        self.accepted = 0
        self.ttft = Histogram()
        self.itl = Histogram()
        self.busy = threading.Semaphore(1)  # one request at a time: the others wait

    @contextmanager
    def request(self) -> Iterator[None]:
        with self.lock:
            self.waiting += 1
        with self.busy:
            with self.lock:
                self.waiting -= 1
                self.running += 1
            try:
                yield
            finally:
                with self.lock:
                    self.running -= 1

    def served(self, prompt: int, generated: int, seconds: float, accept_len: float = 0) -> None:
        """One request answered: its tokens, and its time split into TTFT and inter-token."""
        with self.lock:
            self.requests += 1
            self.prompt_tokens += prompt
            self.generation_tokens += generated
            self.cached_tokens += prompt // 2 if self.requests > 1 else 0
            per_token = seconds / max(1, generated)
            self.ttft.observe(per_token)
            self.itl.observe(per_token, max(0, generated - 1))
            if accept_len:
                drafts = max(1, int(generated / accept_len))
                self.drafts += drafts
                self.accepted += generated - drafts

    def vllm(self, model: str, kv_usage: float) -> str:
        lab = f'engine="0",model_name="{model}"'
        with self.lock:
            lines = [
                f"vllm:num_requests_running{{{lab}}} {self.running}.0",
                f"vllm:num_requests_waiting{{{lab}}} {self.waiting}.0",
                f"vllm:kv_cache_usage_perc{{{lab}}} {kv_usage}",
                f"vllm:prefix_cache_queries_total{{{lab}}} {self.prompt_tokens}.0",
                f"vllm:prefix_cache_hits_total{{{lab}}} {self.cached_tokens}.0",
                f"vllm:prompt_tokens_total{{{lab}}} {self.prompt_tokens}.0",
                f"vllm:generation_tokens_total{{{lab}}} {self.generation_tokens}.0",
                f'vllm:request_success_total{{{lab},finished_reason="length"}} {self.requests}.0',
                *self.ttft.lines("vllm:time_to_first_token_seconds", lab),
                *self.itl.lines("vllm:inter_token_latency_seconds", lab),
            ]
            if self.drafts:
                lines.append(f"vllm:spec_decode_num_drafts_total{{{lab}}} {self.drafts}.0")
                draft_tokens = self.accepted + self.drafts
                lines.append(f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {draft_tokens}.0")
                lines.append(
                    f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {self.accepted}.0"
                )
        return "\n".join(lines) + "\n"

    def sglang(self, lab: str, token_usage: float) -> str:
        """What the server's request gauges (http_api.GlobalState) do not already say."""
        with self.lock:
            hit = self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
            accept = 1 + self.accepted / self.drafts if self.drafts else 0.0
            lines = [
                f"sglang:token_usage{{{lab}}} {token_usage}",
                f"sglang:cache_hit_rate{{{lab}}} {hit}",
                f"sglang:spec_accept_length{{{lab}}} {accept}",
                f"sglang:prompt_tokens_total{{{lab}}} {self.prompt_tokens}.0",
                f"sglang:generation_tokens_total{{{lab}}} {self.generation_tokens}.0",
                f"sglang:num_requests_total{{{lab}}} {self.requests}.0",
                *self.ttft.lines("sglang:time_to_first_token_seconds", lab),
                *self.itl.lines("sglang:inter_token_latency_seconds", lab),
            ]
        return "\n".join(lines)

    def kv_usage(self) -> float:
        """A KV cache that fills with the requests in flight."""
        with self.lock:
            return round(min(1.0, 0.25 * (self.running + self.waiting)), 4)


METRICS = Metrics()
