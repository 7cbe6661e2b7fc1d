"""How many SSH connections may be in their handshake at once, across every host of a fleet.

A bastion's sshd drops new connections past MaxStartups (OpenSSH's default 10:30:100: from 10
unauthenticated connections on, 30% of new ones are refused, rising to all at 100), and a
laptop's CPU does every handshake's key exchange: opening 128 connections at once makes most
of them time out. Only the handshake is gated: an open connection (a wait that lasts minutes)
holds no slot, so a fleet's hosts are all waited on at once, while they connect a few at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_CONNECTING = 8  # below MaxStartups' 10, leaving room for the operator's other ssh


class ConnectGate:
    """A counting gate whose size can change (the CLI sets it from --max-parallel)."""

    def __init__(self, size: int = DEFAULT_CONNECTING) -> None:
        self._size = size
        self._busy = 0
        self._cond = threading.Condition()
        self._held = threading.local()

    @property
    def size(self) -> int:
        return self._size

    def resize(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"at least one connection must be allowed, not {size}")
        with self._cond:
            self._size = size
            self._cond.notify_all()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """One handshake's slot. Re-entrant per thread: a host behind a bastion opens the
        bastion inside its own open, and must not wait for a second slot (a deadlock once
        every slot is held by a host waiting for its bastion)."""
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        with self._cond:
            self._cond.wait_for(lambda: self._busy < self._size)
            self._busy += 1
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            with self._cond:
                self._busy -= 1
                self._cond.notify()


CONNECTING = ConnectGate()
