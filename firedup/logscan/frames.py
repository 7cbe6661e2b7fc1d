"""The shapes of a traceback: its header (whole or cut), its frame lines, its exception line,
and the causes its frames point at when the exception names none (a pasted or cut-off
traceback: the frames of a compiler run, NCCL, the graph capture, the Hub's HTTP error).
The reasons' own words are signatures.py's table; this module knows where a traceback runs.
"""

from __future__ import annotations

import builtins
import re

from firedup.logscan.model import Reason

R = Reason

# A traceback's frame line. Users often paste a traceback without its header: frames (and the
# exception line after them) are evidence on their own.
# A frame hard-wrapped right after its path still counts.
FRAME_LINE = re.compile(r'\s*File "[^"]*"(?:, line \d+|\s*$)')

# Where a traceback's frames run tells its cause when its exception line is missing (a pasted
# or cut-off traceback) or names nothing: a compiler run, NCCL, the CUDA graph capture.
FRAME_HINTS: tuple[tuple[str, re.Pattern[str], Reason], ...] = tuple(
    (needle, re.compile(pattern, re.IGNORECASE), reason)
    for needle, pattern, reason in (
        ("ninja", r"_run_ninja_build|\brun_ninja\b", R.JIT_BUILD),
        ("build_and_load", r"build_and_load\(", R.JIT_BUILD),
        ("nccl", r"pynccl|nccl_check|ncclcomminitrank|processgroupnccl", R.NCCL),
        # Cut inside torch.distributed itself (a collective, a process group's set-up or tear-down).
        ("distributed_c10d", r"distributed_c10d\.py", R.NCCL),
        ("cuda_graph_runner", r"cuda_graph_runner\.py", R.CUDA_GRAPH_CAPTURE),
        ("supports_dtype", r"_check_if_gpu_supports_dtype", R.UNSUPPORTED_GPU),
        # Raised while the command line was parsed (vLLM's FlexibleArgumentParser checks
        # more than argparse does): the arguments were refused.
        ("parse_args", r", in parse_args\s*$", R.BAD_ARGS),
        # Cut where huggingface_hub turns the Hub's HTTP error into its own (utils/_http.py;
        # _errors.py before 0.20): the Hub refused the model's files (gated, private, missing).
        ("hf_raise_for_status", r", in hf_raise_for_status\s*$", R.MODEL_NOT_FOUND),
    )
)

# SGLang's graph runners turn a RuntimeError raised while capturing into `Capture cuda graph
# failed: ...` (cuda_graph_runner.py, every release since 0.1); any other exception passes
# through raw. One of Python's own exceptions that is no RuntimeError (`TypeError`,
# `AttributeError`, `KeyError`, ...) names a bug in the code the capture ran, not the capture.
_CODE_BUGS = frozenset(
    name
    for name, kind in vars(builtins).items()
    if isinstance(kind, type)
    and issubclass(kind, Exception)
    and not issubclass(kind, RuntimeError)
    and kind is not Exception  # what a wrapper raises: it names nothing
)
_EXCEPTION_NAME = re.compile(r"\s*(?:\w+\.)*(\w+)")


def closing_hint(hint: Reason | None, exception: str) -> Reason | None:
    """The cause a traceback's frames name once its exception line is read: a bug in the code
    a graph capture ran is no capture failure."""
    if hint is R.CUDA_GRAPH_CAPTURE:
        name = _EXCEPTION_NAME.match(exception)
        if name is not None and name.group(1) in _CODE_BUGS:
            return None
    return hint


TRACEBACK_HEADER = "Traceback (most recent call last)"
_HEADER_CUT = "Traceback ("  # the least of a header a cut may keep


def is_traceback_header(message: str) -> bool:
    """A traceback's header, whole or cut short where the log (or the excerpt) ends:
    `Traceback (most recent call las` still opens the traceback the rest would have shown."""
    if TRACEBACK_HEADER in message:
        return True
    at = message.rfind(_HEADER_CUT)
    return at >= 0 and TRACEBACK_HEADER.startswith(message[at:].rstrip())


EXCEPTION_IGNORED = "Exception ignored in"
# vLLM's chat-template helper logs the traceback of a template that raised ("An error occurred
# in `transformers` while applying chat template", `mistral_common` too: entrypoints/
# chat_utils.py, renderers/), then raises a ValueError its callers always catch (a request's
# handler answers 400; the start-up warm-up logs "Chat template warmup failed" and goes on).
TEMPLATE_CAUGHT = (
    "An error occurred in `",
    (
        "transformers` while applying chat template",
        "mistral_common` while applying chat template",
    ),
)
# A traceback's last line: `ValueError: ...`, `torch.OutOfMemoryError: ...`, `KeyboardInterrupt`.
EXCEPTION_LINE = re.compile(
    r"\s*(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Interrupt|Exit|Failure|Timeout)(?::\s|:?\s*$)"
)


def frame_hint(message: str) -> Reason | None:
    """The cause a traceback line points at by where it runs, if it names one."""
    lower = message.lower()
    for needle, pattern, reason in FRAME_HINTS:
        if needle in lower and pattern.search(message):
            return reason
    return None
