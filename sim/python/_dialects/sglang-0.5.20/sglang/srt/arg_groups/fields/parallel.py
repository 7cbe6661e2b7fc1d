"""Config fields of the `parallel` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A, Arg


class Parallel:
    _NS_PATH = "parallel"
    dist_timeout: A[int | None, "Set timeout for torch.distributed initialization."] = None
    dist_init_addr: A[
        str | None,
        Arg(help="The host address for the distributed init.", aliases=["--nccl-init-addr"]),
    ] = None
    nnodes: A[int, "The number of nodes."] = 1
    node_rank: A[int, "The node rank."] = 0
    tp_size: A[
        int, Arg(help="The tensor parallelism size.", aliases=["--tensor-parallel-size"])
    ] = 1
    pp_size: A[
        int, Arg(help="The pipeline parallelism size.", aliases=["--pipeline-parallel-size"])
    ] = 1
    dp_size: A[int, Arg(help="The data parallelism size.", aliases=["--data-parallel-size"])] = 1
    ep_size: A[
        int, Arg(help="The expert parallelism size.", aliases=["--expert-parallel-size", "--ep"])
    ] = 1
