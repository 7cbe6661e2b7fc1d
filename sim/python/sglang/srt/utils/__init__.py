from sglang.srt.utils.common import (
    configure_logger,
    get_available_gpu_memory,
    get_exception_traceback,
    kill_itself_when_parent_died,
    kill_process_tree,
)

__all__ = [
    "configure_logger",
    "get_available_gpu_memory",
    "get_exception_traceback",
    "kill_itself_when_parent_died",
    "kill_process_tree",
]
