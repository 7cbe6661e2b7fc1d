"""Where a line sits: evidence is weighed by its context, not by its words alone.

- Text inside a quoted literal is data the engine echoes (a logged prompt, a served model
  name, an argument's value): `Received request ...: prompt: 'CUDA out of memory ...'` names
  no failure, and `served_model_name='The server is fired up and ready to roll!'` is not the
  ready line. A quote opens a literal only after a non-word character, so the apostrophe of
  `model's` opens nothing.
- A stop is a stop: once the server was told to stop (a process reporting the SIGTERM or
  SIGINT it received, Ctrl-C's `KeyboardInterrupt`, a batch scheduler cancelling the job,
  uvicorn's `Shutting down`, vLLM's `[shutdown] ...` lines), what dies after it dies of the
  stop. vLLM's API server then logs `EngineDeadError` for the EngineCore it just stopped, and
  SGLang's watchdog `crashed with exit code -15` for a child the SIGTERM ended; no crash.
  Order decides: an error before the stop is a failure, and failed stays failed.
"""

from __future__ import annotations

import re

# A file hole: a writer that does not append (`>` in a second launch truncated the log and wrote
# its own lines; the first server writes on at its own offset) leaves the bytes between as NULs.
# What follows a hole is a later write, a story of its own.
HOLE = b"\0" * 1024

_LITERAL = re.compile(r"""(?<!\w)(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?!\w)""")

# A stop asked for from outside (the engines' released messages): a signal received (vLLM's
# `Received SIGTERM`, `trigger received signal=SIGTERM`; SGLang's `SIGTERM received. ...
# Draining requests and shutting down...` and the `Gracefully exiting...` that follows it), the
# API server's shutdown order (and vLLM 0.8-0.11's `Shutting down FastAPI HTTP server`, logged
# when its SIGINT/SIGTERM handler cancelled the server), Ctrl-C's `KeyboardInterrupt` (vLLM
# raises `KeyboardInterrupt: terminated` on a SIGTERM during startup, V0's engine process
# `KeyboardInterrupt: MQLLMEngine terminated`), a batch scheduler cancelling the job (Slurm's
# `*** JOB N ON host CANCELLED AT ... ***`; srun's `sending Ctrl-C to StepId=...`, but not its
# `Job step aborted` or `forcing job termination`: those follow a task's failure too), and the
# shell reporting its child `Terminated`; and the terminal's echo of a Ctrl-C (`^C`, caret
# notation, at the start of a line or glued to the end of the last output: the tty sent SIGINT
# to the foreground job; the ETX byte itself is dropped as a control byte).
STOP_TRIGGER = re.compile(
    r"(?i)\b(?:received|receive|got|caught) (?:signal[= ]?|a )?SIG(?:TERM|INT)\b"
    r"|\bSIG(?:TERM|INT) received\b|^Gracefully exiting\.\.\."
    r"|^\[shutdown\] API server: shutdown triggered|Shutting down FastAPI HTTP server"
    r"|^\s*(?:\w+\.)*KeyboardInterrupt(?::|\s*$)|\bReceived KeyboardInterrupt\b"
    r"|\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT (?!.*NODE FAIL)|^(?:srun: )?sending Ctrl-C to "
    r"|^(?:.*: )?line \d+: +\d+ Terminated\b|^(?:\^C)+(?:\s|$)|\S\^C$"
)
# Lines of an orderly shutdown: uvicorn prints these only once its own startup completed and
# it was told to exit, so from the HTTP side up they mean a stop; vLLM's `[shutdown] ...` lines
# mean one after ready.
_UVICORN_STOP = re.compile(
    r"^(?:Shutting down$|Waiting for application shutdown|Application shutdown complete"
    r"|Finished server process)"
)
_SHUTDOWN = re.compile(r"^\[shutdown\] ")
# A child's death by SIGTERM or SIGINT, reported on a line a signature row names: SGLang's
# watchdog at any time (`Subprocess detokenizer (pid=N) crashed with exit code -15`: SGLang's
# own clean-up, kill_process_tree, kills with SIGKILL, so a -15 or -2 came from outside); after
# ready any report (`Worker proc VllmWorker-1 died unexpectedly (exit code: -15)`: the group's
# processes get the signal at once, and a worker's death can be logged before the stop's line).
# While starting, vLLM's own clean-up TERMs its workers after a failure: no stop then.
_SIGNALLED = re.compile(r"crashed with exit code -(?:15|2)\b")
_SIGNALLED_READY = re.compile(r"\bexit ?code:? -(?:15|2)\b")


# An HTTP client's error on a server's health or metadata route (`requests.exceptions.HTTPError:
# 503 Server Error: Service Unavailable for url: http://localhost:30000/health`, `Max retries
# exceeded with url: /v1/models (... Connection refused)`, urllib's `HTTP Error 503: Service
# Unavailable`): a probe waiting for the server (a CI job, a readiness script; /health answers
# 503 until ready), not the server failing. A download's error names another host's path.
_PROBE_ERROR = re.compile(
    r"(?:Error|Exception)\b.*\burl:? '?(?:https?://[^/\s']+)?/(?:health\w*|v1/models|ping|version"
    r"|model_info|get_model_info|server_info|metrics|readyz?|livez?)\b|HTTP Error 503: Service Unav"
)


def probe_error(message: str) -> bool:
    """Whether an exception line is a readiness probe's, not the server's (see _PROBE_ERROR)."""
    return "rror" in message and _PROBE_ERROR.search(message) is not None


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
    r"SIG|Shutting|Waiting for|Application shutdown|Finished|\[shutdown\]|Gracefully"
    r"|KeyboardInterrupt|CANCELLED|Ctrl-C|Terminated|^\^C|\^C$"
)


def is_stop(message: str, *, ready: bool, http_up: bool = False) -> bool:
    """Whether the line says the server is being stopped: a stop asked for from outside at any
    time, uvicorn's shutdown once the HTTP side is up, any shutdown line once ready."""
    if _STOP_HINTS.search(message) is None:
        return False  # the common case, cheaply
    if STOP_TRIGGER.search(message):
        return True
    if (ready or http_up) and _UVICORN_STOP.match(message) is not None:
        return True
    return ready and _SHUTDOWN.match(message) is not None


def signalled(message: str, *, ready: bool) -> bool:
    """Whether a death report (a line a signature names) says the child died of a stop signal."""
    pattern = _SIGNALLED_READY if ready else _SIGNALLED
    return "code" in message and pattern.search(message) is not None
