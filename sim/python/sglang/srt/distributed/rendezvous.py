"""Multi-node rendezvous at --dist-init-addr, like torch's TCPStore master.

Local rank 0 of node 0 listens on the address; local rank 0 of every other node connects and
says hello; when all --nnodes are in, the master answers each with "go". A node that never
arrives leaves the others waiting after "Init torch distributed begin.", silently.
"""

from __future__ import annotations

from firedup_sim import rendezvous as _rdv


def rendezvous(dist_init_addr: str, nnodes: int, node_rank: int) -> None:
    _rdv.rendezvous(dist_init_addr, nnodes, node_rank)
