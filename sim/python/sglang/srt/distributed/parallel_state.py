"""Process-group stand-in: a barrier shared by the TP ranks of this node.

A collective waits for every rank; if one rank is gone it waits forever, silently, as NCCL does.
"""

from __future__ import annotations

from typing import Any

from sglang.srt.distributed.device_communicators.pynccl_wrapper import NCCLLibrary
from sglang.srt.distributed.rendezvous import rendezvous

_state: dict[str, Any] = {"barrier": None, "tp_rank": 0, "tp_size": 1, "server_args": None}


def set_group(barrier: Any, tp_rank: int, tp_size: int, server_args: Any = None) -> None:
    _state.update(barrier=barrier, tp_rank=tp_rank, tp_size=tp_size, server_args=server_args)


def get_tensor_model_parallel_rank() -> int:
    return int(_state["tp_rank"])


def init_distributed_environment(world_size: int, rank: int) -> None:
    args = _state["server_args"]
    multi_node = args is not None and args.nnodes > 1 and args.dist_init_addr
    if multi_node and rank == args.node_rank * (args.tp_size // args.nnodes):
        rendezvous(args.dist_init_addr, args.nnodes, args.node_rank)
    NCCLLibrary().ncclCommInitRank(world_size, rank)
    barrier()


def barrier() -> None:
    if _state["barrier"] is not None:
        _state["barrier"].wait()
