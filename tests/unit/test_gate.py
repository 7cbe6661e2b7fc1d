"""The connect gate: never more handshakes at once than its size, and resizable."""

from __future__ import annotations

import threading
import time

import pytest

from firedup.node.gate import ConnectGate


def test_the_gate_holds_at_most_its_size() -> None:
    gate = ConnectGate(3)
    inside, peak, lock = 0, 0, threading.Lock()

    def connect() -> None:
        nonlocal inside, peak
        with gate.slot():
            with lock:
                inside += 1
                peak = max(peak, inside)
            time.sleep(0.01)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=connect) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak == 3 and inside == 0


def test_a_wider_gate_lets_waiters_in_at_once() -> None:
    gate = ConnectGate(1)
    entered = threading.Event()
    with gate.slot():
        waiter = threading.Thread(target=lambda: _enter(gate, entered))
        waiter.start()
        assert not entered.wait(0.1)
        gate.resize(2)
        assert entered.wait(5)
    waiter.join(5)
    with pytest.raises(ValueError):
        gate.resize(0)


def _enter(gate: ConnectGate, entered: threading.Event) -> None:
    with gate.slot():
        entered.set()


def test_a_host_behind_a_bastion_takes_one_slot() -> None:
    """The bastion opens inside the host's own open: a second slot would deadlock a full
    gate."""
    gate = ConnectGate(1)
    with gate.slot(), gate.slot():
        pass
    with gate.slot():  # and the slot is free again
        pass
