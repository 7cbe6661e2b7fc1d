"""Where a line sits: evidence is weighed by its context, not by its words alone.

- Text inside a quoted literal is data the engine echoes (a logged prompt, a served model
  name, an argument's value): `Received request ...: prompt: 'CUDA out of memory ...'` names
  no failure, and `served_model_name='The server is fired up and ready to roll!'` is not the
  ready line. A quote opens a literal only after a non-word character, so the apostrophe of
  `model's` opens nothing.
- A stop is a stop: once the server was told to stop (uvicorn's `Shutting down`, vLLM's
  `[shutdown] ...` lines, a process reporting the SIGTERM it received), what dies after it
  dies of the stop. vLLM's API server then logs `EngineDeadError` for the EngineCore it just
  stopped; that is no crash.
"""

from __future__ import annotations

import re

_LITERAL = re.compile(r"""(?<!\w)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?!\w)""")

# A stop asked for from outside: a signal received, the API server's own shutdown order, or
# the terminal's echo of a Ctrl-C (`^C`, caret notation, at the start of a line or glued to the
# end of the last output: the tty sent SIGINT to the foreground job; the ETX byte itself is
# dropped as a control byte).
STOP_TRIGGER = re.compile(
    r"(?i)\b(?:received|receive|got|caught) (?:signal[= ]?|a )?SIG(?:TERM|INT)\b"
    r"|^\[shutdown\] API server: shutdown triggered|^(?:\^C)+(?:\s|$)|\S\^C$"
)
# Lines of an orderly shutdown; after ready any of them means the server is being stopped.
_SHUTDOWN = re.compile(
    r"^(?:Shutting down$|Waiting for application shutdown|Application shutdown complete"
    r"|Finished server process|\[shutdown\] )"
)


def quoted(message: str, start: int) -> bool:
    """Whether position `start` of the message lies inside a quoted literal."""
    if "'" not in message and '"' not in message:
        return False
    for literal in _LITERAL.finditer(message):
        if literal.start() < start < literal.end():
            return True
        if literal.start() > start:
            return False
    return False


def only_quoted(message: str, needles: tuple[str, ...]) -> bool:
    """Whether every occurrence of the needles (lower-case) lies inside quoted literals."""
    lower = message.lower()
    found = False
    for needle in needles:
        at = lower.find(needle)
        while at >= 0:
            if not quoted(message, at):
                return False
            found = True
            at = lower.find(needle, at + 1)
    return found


_STOP_HINTS = re.compile(
    r"SIG|Shutting|Waiting for|Application shutdown|Finished|\[shutdown\]|^\^C|\^C$"
)


def is_stop(message: str, *, ready: bool) -> bool:
    """Whether the line says the server is being stopped (any shutdown line once ready)."""
    if _STOP_HINTS.search(message) is None:
        return False  # the common case, cheaply
    if STOP_TRIGGER.search(message):
        return True
    return ready and _SHUTDOWN.match(message) is not None
