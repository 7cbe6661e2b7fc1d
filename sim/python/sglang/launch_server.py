"""Launch the server: `python -m sglang.launch_server --model-path M --port P ...`."""

import os
import sys

from firedup_sim import events

from sglang.srt.entrypoints.http_server import launch_server
from sglang.srt.server_args import prepare_server_args
from sglang.srt.utils import kill_process_tree

if __name__ == "__main__":
    server_args = prepare_server_args(sys.argv[1:])

    try:
        launch_server(server_args)
    except BaseException:
        events.record("crashed")
        raise
    finally:
        kill_process_tree(os.getpid(), include_parent=False)
