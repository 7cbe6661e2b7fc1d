"""The detokenizer process: only its presence in the process tree is simulated."""

from __future__ import annotations

import signal
from typing import Any

from firedup_sim import clock, proctitle
from sglang.srt.utils import configure_logger, kill_itself_when_parent_died


def run_detokenizer_process(server_args: Any) -> None:
    for sig in (signal.SIGQUIT, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    proctitle.set_title("sglang::detokenizer")
    kill_itself_when_parent_died()
    configure_logger(server_args)
    clock.sleep_forever()
