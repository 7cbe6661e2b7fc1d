"""uvicorn's log lines and server lifecycle on top of http.server (shared by sglang and vllm).

Lines keep uvicorn's shape: `%(levelprefix)s %(message)s` with the level padded to 9 columns;
access lines `client - "METHOD path HTTP/1.1" status phrase`. The caller passes the timestamp
wrapper it wants (sglang prefixes `[date time] `, vllm its own format).
"""

from __future__ import annotations

import http.server
import logging
import socket
import sys
import threading
from http import HTTPStatus
from typing import Any


class LevelPrefixFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.levelprefix = record.levelname + ":" + " " * (8 - len(record.levelname))
        return super().format(record)


def setup_loggers(fmt: str, datefmt: str, access_log: bool = True) -> None:
    for name, stream in (("uvicorn.error", sys.stderr), ("uvicorn.access", sys.stdout)):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(LevelPrefixFormatter(fmt, datefmt))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    if not access_log:
        logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    sys.stdout.reconfigure(line_buffering=True)


error_log = logging.getLogger("uvicorn.error")
access_log = logging.getLogger("uvicorn.access")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, handler: type) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), handler, bind_and_activate=False)

    def bind_only(self) -> None:
        """Bind without listen(): the port is taken but connections are refused (vLLM)."""
        self.server_bind()

    def listen(self) -> None:
        self.server_activate()


def bind_error_message(host: str, port: int, exc: OSError) -> str:
    # asyncio's create_server wording, which uvicorn logs as is.
    return (
        f"[Errno {exc.errno}] error while attempting to bind on address "
        f"({host!r}, {port}): {(exc.strerror or '').lower()}"
    )


class AccessLoggedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass  # uvicorn's access log is written by send_reply

    def send_reply(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
        phrase = HTTPStatus(status).phrase
        client = f"{self.client_address[0]}:{self.client_address[1]}"
        access_log.info(f'{client} - "{self.requestline}" {status} {phrase}')
        self.send_response_only(status, phrase)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-length", str(len(body)))
        if body:
            self.send_header("content-type", ctype)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""


def serve_in_thread(server: Server) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="uvicorn", daemon=True)
    thread.start()
    return thread
