"""vLLM's line format: `(Proc pid=N) LEVEL mm-dd HH:MM:SS [file.py:N] message` (no year)."""

from __future__ import annotations

import logging
import os
import sys

_FMT = "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"  # noqa: E501
DATEFMT = "%m-%d %H:%M:%S"
_state = {"process_name": "APIServer"}


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.vllm_process_name = _state["process_name"]
        record.fileinfo = getattr(record, "vllm_file", os.path.basename(record.pathname))
        if hasattr(record, "vllm_line"):
            record.lineno = record.vllm_line
        text = super().format(record)
        # vLLM's NewLineFormatter repeats the header on every line of a multi-line message.
        header = text[: text.index("] ") + 2] if "] " in text else ""
        lines = text.split("\n")
        return "\n".join([lines[0]] + [header + line for line in lines[1:]])


def configure(process_name: str) -> None:
    _state["process_name"] = process_name
    root = logging.getLogger("vllm")
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(os.environ.get("VLLM_LOGGING_PREFIX", "") + _FMT, DATEFMT))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def uvicorn_format() -> str:
    return f"({_state['process_name']} pid={os.getpid()}) %(levelprefix)s %(message)s"


class SourceLogger:
    """Logs as if from vLLM source file `file` at line `line` (the real [file.py:N] tags)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.log = logging.getLogger(f"vllm.{file}")

    def info(self, line: int, msg: str) -> None:
        self.log.info(msg, extra={"vllm_file": self.file, "vllm_line": line})

    def warning(self, line: int, msg: str) -> None:
        self.log.warning(msg, extra={"vllm_file": self.file, "vllm_line": line})

    def error(self, line: int, msg: str) -> None:
        self.log.error(msg, extra={"vllm_file": self.file, "vllm_line": line})
