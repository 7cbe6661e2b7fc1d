"""A load generator: requests at a fixed rate through a router, answers and errors counted.

Bounded in count and in time, loopback only; each request is its own thread so a slow answer
never delays the next send (the rate stays fixed, as users' traffic does).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field


@dataclass
class Tally:
    sent: int = 0
    ok: int = 0
    errors: list[str] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def percentile(self, q: float) -> float:
        done = sorted(self.latencies_s)
        return done[min(len(done) - 1, int(q * len(done)))] if done else 0.0

    def summary(self) -> dict[str, object]:
        return {
            "sent": self.sent,
            "ok": self.ok,
            "failed": len(self.errors),
            "p50_s": round(self.percentile(0.5), 4),
            "p99_s": round(self.percentile(0.99), 4),
            "first_errors": self.errors[:5],
        }


class Load:
    """`with Load(url, rate) as load:` sends POST /generate at `rate` per second until the
    block ends (or `max_s` / `max_requests`), then waits for every answer."""

    def __init__(
        self, base_url: str, rate_per_s: float, *, max_s: float = 300, max_requests: int = 5000
    ) -> None:
        self.url = base_url.rstrip("/") + "/generate"
        self.interval_s = 1.0 / rate_per_s
        self.max_s, self.max_requests = max_s, max_requests
        self.tally = Tally()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.sender = threading.Thread(target=self._send_loop, daemon=True)
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _one(self, n: int) -> None:
        body = json.dumps({"text": f"request {n}", "sampling_params": {"max_new_tokens": 8}})
        request = urllib.request.Request(
            self.url, data=body.encode(), headers={"Content-Type": "application/json"}
        )
        start = time.monotonic()
        try:
            with self.opener.open(request, timeout=60) as response:
                response.read()
                good = response.status == 200
                what = f"{response.status}"
        except urllib.error.HTTPError as exc:
            good, what = False, f"{exc.code} {exc.read()[:120]!r}"
        except OSError as exc:
            good, what = False, f"{type(exc).__name__}: {exc}"
        with self.tally.lock:
            if good:
                self.tally.ok += 1
                self.tally.latencies_s.append(time.monotonic() - start)
            else:
                self.tally.errors.append(f"#{n}: {what}")

    def _send_loop(self) -> None:
        start = time.monotonic()
        n = 0
        while not self.stop.is_set() and n < self.max_requests:
            if time.monotonic() - start > self.max_s:
                break
            thread = threading.Thread(target=self._one, args=(n,), daemon=True)
            thread.start()
            self.threads.append(thread)
            n += 1
            with self.tally.lock:
                self.tally.sent = n
            self.stop.wait(max(0.0, start + n * self.interval_s - time.monotonic()))

    def __enter__(self) -> Load:
        self.sender.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.sender.join()
        for thread in self.threads:
            thread.join(timeout=90)
