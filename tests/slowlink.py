"""A slow link on loopback: a TCP relay with a rate and a delay, counting the bytes each way.

Operators reach GPU nodes over VPNs and bastions; a wait that is fine on loopback can fall
behind on a 150 KB/s link. The relay models one access link: each direction has its own
token bucket shared by every connection through it (so a second channel or connection does
not get a link of its own), and every byte is delivered `delay_s` after it was sent (the
one-way propagation delay). A reader thread takes tokens before it reads on, so the sender
feels the link's rate through TCP's own back-pressure; a writer thread holds each piece
until its delivery time, so the delay adds latency without capping throughput.

rate_bps=0 means no rate limit and delay_s=0 no delay: a plain counting relay (the bench's
wire meter on loopback).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

PIECE = 16 * 1024  # bytes per read: small enough that a 150 KB/s bucket stays smooth


class TokenBucket:
    """`rate_bps` bytes per second with a burst of one piece; shared by threads."""

    def __init__(self, rate_bps: float) -> None:
        self.rate = rate_bps
        self.tokens = float(PIECE)
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self, n: int) -> None:
        """Block until `n` bytes may go (the debt model: take now, wait off what is owed)."""
        if self.rate <= 0:
            return
        with self.lock:
            now = time.monotonic()
            self.tokens = min(float(PIECE), self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= n
            owed = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if owed > 0:
            time.sleep(owed)


class SlowLink:
    """A relay on 127.0.0.1:`port` to `target_port`, with `rate_bps` and `delay_s` each way."""

    def __init__(self, target_port: int, rate_bps: float = 0, delay_s: float = 0.0) -> None:
        self.target_port = target_port
        self.delay_s = delay_s
        self.buckets = {True: TokenBucket(rate_bps), False: TokenBucket(rate_bps)}
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.to_node = 0
        self.from_node = 0
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.to_drop = 0  # connections to close at once, as a full sshd (MaxStartups) does
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_next(self, n: int) -> None:
        """Close the next `n` connections as soon as they arrive, before any byte."""
        with self.lock:
            self.to_drop = n

    def set_rate(self, rate_bps: float, delay_s: float | None = None) -> None:
        """Change the link for the connections that come next and those already open."""
        for bucket in self.buckets.values():
            bucket.rate = rate_bps
        if delay_s is not None:
            self.delay_s = delay_s

    def snapshot(self) -> tuple[int, int]:
        """(bytes to the node, bytes from the node) so far."""
        with self.lock:
            return self.to_node, self.from_node

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                drop, self.to_drop = self.to_drop > 0, max(0, self.to_drop - 1)
            if drop:
                client.close()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            self.sockets += [client, server]
            for src, dst, up in ((client, server, True), (server, client, False)):
                pieces: queue.Queue[tuple[float, bytes]] = queue.Queue()
                threading.Thread(target=self._read, args=(src, pieces, up), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, pieces), daemon=True).start()

    def _read(self, src: socket.socket, pieces: queue.Queue[tuple[float, bytes]], up: bool) -> None:
        bucket = self.buckets[up]
        try:
            while True:
                data = src.recv(PIECE)
                if not data:
                    break
                bucket.take(len(data))
                pieces.put((time.monotonic() + self.delay_s, data))
                with self.lock:
                    if up:
                        self.to_node += len(data)
                    else:
                        self.from_node += len(data)
        except OSError:
            pass
        pieces.put((time.monotonic() + self.delay_s, b""))

    def _write(self, dst: socket.socket, pieces: queue.Queue[tuple[float, bytes]]) -> None:
        try:
            while True:
                due, data = pieces.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()


def round_trip_s(transport: object) -> float:
    """An SSH connection's round trip (a paramiko Transport): a global request with a reply
    (sshd answers one it does not know at once, with a failure), the fastest of three."""
    best = float("inf")
    for _ in range(3):
        t0 = time.monotonic()
        transport.global_request("firedup-rtt@firedup", wait=True)  # type: ignore[attr-defined]
        best = min(best, time.monotonic() - t0)
    return best
