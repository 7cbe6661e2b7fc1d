"""Logging, process-tree and memory helpers with the behaviour of srt/utils/common.py."""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback

from firedup_sim import gpustate, proctitle, proctree

logger = logging.getLogger(__name__)


def configure_logger(server_args, prefix: str = "") -> None:
    fmt = f"[%(asctime)s{prefix}] %(message)s"
    logging.basicConfig(
        level=getattr(logging, server_args.log_level.upper()),
        format=fmt,
        datefmt="%Y-%m-%d %H:%M:%S",
        force=True,
    )


def kill_itself_when_parent_died() -> None:
    proctitle.die_with_parent(signal.SIGKILL)


def get_exception_traceback() -> str:
    return "".join(traceback.format_exception(*sys.exc_info()))


def kill_process_tree(parent_pid: int | None, include_parent: bool = True) -> None:
    """SIGKILL the children, then the process itself (the shell then sees status 137)."""
    if parent_pid is None:
        parent_pid = os.getpid()
        include_parent = False
    proctree.kill_descendants(parent_pid)
    if include_parent:
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(parent_pid, signal.SIGKILL)
        sys.exit(0)


def get_available_gpu_memory(gpu_id: int) -> float:
    return gpustate.avail_gb(gpustate.physical(gpu_id))
