"""Multi-node rendezvous over TCP at --dist-init-addr, like torch's TCPStore master.

Local rank 0 of node 0 listens on the address; local rank 0 of every other node connects and
says hello; when all --nnodes are in, the master answers each with "go". A node that never
arrives leaves the others waiting after "Init torch distributed begin.", silently.
"""

from __future__ import annotations

import socket
import time


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host or "127.0.0.1", int(port)


def rendezvous(dist_init_addr: str, nnodes: int, node_rank: int) -> None:
    host, port = _split(dist_init_addr)
    if node_rank == 0:
        _serve(host, port, nnodes)
    else:
        _join(host, port, node_rank)


def _serve(host: str, port: int, nnodes: int) -> None:
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
            conn.close()


def _join(host: str, port: int, node_rank: int) -> None:
    while True:  # the master may not be up yet: retry like TCPStore clients do
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                conn.sendall(f"hello {node_rank}".encode())
                conn.settimeout(None)
                if conn.recv(2) == b"go":
                    return
        except OSError:
            time.sleep(0.2)
