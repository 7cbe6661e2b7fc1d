"""Lines that look alarming or busy but tell nothing bad: harmless warnings, serving traffic.

Scary-looking lines that are part of healthy startups (issue 4 §3) are checked first and can
never fail a run. Serving traffic and NCCL chatter, the bulk of a long log, skip the signature
table (the costly part of reading a line); requests answered show a server that was ready.
"""

from __future__ import annotations

import re

# Scary-looking lines that are part of healthy startups (issue 4 §3). They are checked first
# and can never fail a run, whatever else they contain.
HARMLESS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (needle, re.compile(pattern, re.IGNORECASE))
    for needle, pattern in (
        ("custom allreduce", r"setup custom allreduce failed"),
        ("ignore import error", r"ignore import error"),
        ("warning", r"(?:deprecation|future|user|runtime|resource)warning:"),
        ("deprecated", r"\bdeprecated\b"),
        ("nccl info", r"\bnccl info\b"),
        ("nccl warn", r"\bnccl warn\b"),
        ("resource_tracker", r"resource_tracker"),
        ("[w", r"^\[w(?:\d{4} [\d:.]+)?[^\]]*\]"),  # glog warnings from torch c10d
        ("exception ignored in", r"^exception ignored in"),
    )
)

# The bulk of a long log: serving traffic and NCCL chatter. Never a failure signature, so the
# signature table (the costly part of reading a line) is skipped for them.
ROUTINE = (
    "Decode batch",
    "Prefill batch",
    "127.0.0.1:",
    'GET /health HTTP/1.1"',
    "Avg prompt throughput",
    "Engine 000: Avg prompt throughput",
)

# A server answering requests: a log that starts here shows a server that was ready.
# Metadata endpoints (`/v1/models`, `/metrics`, `/health` answered 503...) are served by the
# HTTP side alone, before the engine is ready: they prove nothing.
SERVING = re.compile(
    r'"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) /(?!(?:v1/)?models\b|metrics\b|version\b|ping\b'
    r'|docs\b|openapi\.json|(?:get_)?model_info\b|(?:get_)?server_info\b)\S* HTTP/[\d.]+" [234]\d\d'
    r"|^(?:Decode|Prefill) batch\b|Avg prompt throughput|^Exception in ASGI application"
    r"|^\[shutdown\] API server: "  # vLLM's serving HTTP server being stopped
)


def is_routine(message: str) -> bool:
    """Serving traffic and NCCL chatter: never a failure, so never matched against the table."""
    return message.startswith(ROUTINE) or ' HTTP/1.1" ' in message or "NCCL INFO " in message


def is_harmless(message: str) -> bool:
    lower = message.lower()
    return any(needle in lower and pattern.search(message) for needle, pattern in HARMLESS)
