"""Multi-node rendezvous over TCP, like torch's TCPStore master (stdlib only).

The head (node rank 0) listens on the address; every other node connects and says hello;
when all nodes are in, the head answers each with "go". A node that never arrives leaves the
others waiting, silently, as NCCL does. `hold=True` keeps the connections open afterwards,
so a node learns when another one is gone (the socket closes with its process).
"""

from __future__ import annotations

import socket
import time


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host or "127.0.0.1", int(port)


def rendezvous(
    addr: str, nnodes: int, node_rank: int, *, hold: bool = False
) -> list[socket.socket]:
    """Block until every node is in; the open connections when `hold`."""
    host, port = _split(addr)
    if node_rank == 0:
        return serve(host, port, nnodes, hold)
    return [join(host, port, node_rank, hold)]


def serve(host: str, port: int, nnodes: int, hold: bool) -> list[socket.socket]:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((host, port))
        server.listen(nnodes)
        peers = []
        while len(peers) < nnodes - 1:
            conn, _ = server.accept()
            if conn.recv(16).startswith(b"hello"):
                peers.append(conn)
        for conn in peers:
            conn.sendall(b"go")
            if not hold:
                conn.close()
    return peers if hold else []


def join(host: str, port: int, node_rank: int, hold: bool) -> socket.socket:
    while True:  # the head may not be up yet: retry like TCPStore clients do
        try:
            conn = socket.create_connection((host, port), timeout=5)
        except OSError:
            time.sleep(0.2)
            continue
        try:
            conn.sendall(f"hello {node_rank}".encode())
            conn.settimeout(None)
            if conn.recv(2) == b"go":
                if not hold:
                    conn.close()
                return conn
        except OSError:
            pass
        conn.close()
        time.sleep(0.2)


def wait_closed(conn: socket.socket) -> None:
    """Block until the other side's process is gone (its end of the socket closed)."""
    try:
        while conn.recv(1024):
            pass
    except OSError:
        pass
