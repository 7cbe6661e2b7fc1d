"""Simulated time: every nominal duration is divided by FIREDUP_SIM_SPEED."""

from __future__ import annotations

import os
import time


def speed() -> float:
    raw = os.environ.get("FIREDUP_SIM_SPEED", "1")
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"FIREDUP_SIM_SPEED must be a positive float, got {raw!r}") from None
    if value <= 0:
        raise SystemExit(f"FIREDUP_SIM_SPEED must be a positive float, got {raw!r}")
    return value


def scaled(nominal_s: float) -> float:
    return nominal_s / speed()


def sleep(nominal_s: float) -> None:
    time.sleep(scaled(nominal_s))


def sleep_forever() -> None:
    # A hang is silence while staying alive: block in short sleeps so signals still work.
    while True:
        time.sleep(3600)


def request_latency_s() -> float:
    """FIREDUP_SIM_REQUEST_LATENCY_S: real seconds each served request takes on top of its
    tokens (not scaled by the speed): requests stay in flight while a roll goes on."""
    raw = os.environ.get("FIREDUP_SIM_REQUEST_LATENCY_S", "0")
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise SystemExit(f"FIREDUP_SIM_REQUEST_LATENCY_S must be seconds, got {raw!r}") from None
