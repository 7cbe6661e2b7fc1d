"""Failure signatures as data: needle -> regex -> reason, plus the hint each reason carries.

A *strong* signature fails a startup wherever it appears (only a dying server prints it). A
*weak* one names the reason of an exception line inside a traceback, or sharpens a failure
already seen; alone it is a warning, because the same words also appear in harmless places
(the context-length text is a warning when SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, an OOM
can be one request's error after ready). Rows are in priority order: when one line matches
several rows, the first row names the reason and any strong row makes the line fatal.
Strings come from engines.md §3, §4, §5 and §8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from firedup.logscan.hints import HINTS as HINTS  # the table's hints, where callers look
from firedup.logscan.model import Reason
from firedup.logscan.shellwords import SHELL_DEATHS, shell_reports


@dataclass(frozen=True)
class Signature:
    needle: str  # lower-case literal every matching line contains
    pattern: re.Pattern[str]
    reason: Reason
    strong: bool
    report: bool = False  # another process's report that the engine died, not the engine's own
    announce: bool = False  # a process announcing the traceback it dies of: that tells how


def S(reason: Reason, needle: str, pattern: str) -> Signature:
    """A strong row: fatal wherever it appears."""
    return Signature(needle, re.compile(pattern, re.IGNORECASE), reason, True)


def Report(reason: Reason, needle: str, pattern: str) -> Signature:
    """A strong row that only reports a death: fatal while starting; after ready the engine's
    own lines carry any cause, and a stop makes the API server print it too."""
    return Signature(needle, re.compile(pattern, re.IGNORECASE), reason, True, report=True)


def Announce(needle: str, pattern: str) -> Signature:
    """A strong row announcing a dying process's traceback (`Process EngineCore_0:`): the
    traceback's end says whether it died of a failure or of a stop (Ctrl-C's KeyboardInterrupt)."""
    return Signature(needle, re.compile(pattern, re.IGNORECASE), Reason.CRASH, True, announce=True)


def W(reason: Reason, needle: str, pattern: str) -> Signature:
    """A weak row: names an exception's reason, or sharpens a failure already seen."""
    return Signature(needle, re.compile(pattern, re.IGNORECASE), reason, False)


# One bracketed option, `[--dtype {auto,half}]` or `[-h]`, its inner brackets one deep, read in
# one pass (an unrolled loop: no two parts can match the same character, so a line cut inside
# an option fails at once instead of backtracking over every way to split it).
_OPTION = r"\[-{1,2}\w[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]"

R = Reason


def _cut(words: str, *, keep: int) -> str:
    """A row's words, or their first `keep` characters and more where the line ends: a paste
    or a capture cut the line there (`Initialization failed. Ple`)."""
    rest = "".join(f"(?:{re.escape(c)}" for c in words[keep:]) + ")?" * (len(words) - keep)
    return f"{re.escape(words)}|{re.escape(words[:keep])}{rest}\\s*$"


SIGNATURES: tuple[Signature, ...] = (
    W(R.CONTEXT_LENGTH, "context", r"context_length \(\d+\) is greater than the derived"),
    # vLLM's "max_model_len (N) is greater than the derived", a fork's "do not support
    # max_model_len greater than 32768 on N150": a length the model or device cannot take.
    W(R.CONTEXT_LENGTH, "max_model_len", r"max_model_len\b[^.]{0,40}?\bgreater than\b"),
    S(
        R.CONTEXT_LENGTH,
        "kv cache is needed",
        r"kv cache is needed, which is larger than the available kv cache memory",
    ),
    S(
        R.CONTEXT_LENGTH,
        "max seq len",
        r"max seq len \(\d+\) is larger than the maximum number of tokens",
    ),
    W(
        R.MISSING_MODEL_HOOK,
        "has no attribute",
        r"'\w*(?:For\w+|Model|Eagle\w*)' object has no attribute '\w+'",
    ),
    W(R.MISSING_MODEL_HOOK, "does not support", r"language_model does not support"),
    S(R.OOM, "memory", r"not enough memory\. please try to increase --mem-fraction-static"),
    S(R.OOM, "memory", r"no available memory for the cache blocks"),
    S(R.OOM, "memory", r"free memory on device .* is less than desired gpu memory utilization"),
    # vLLM up to 0.2 logs the cache blocks it sized, then raises `No available memory for the
    # cache blocks` when there are none (engine/llm_engine.py `_init_cache`).
    W(R.OOM, "gpu blocks: 0", r"# gpu blocks: 0\b"),
    # vLLM's CPU backend: the KV cache asked for (VLLM_CPU_KVCACHE_SPACE) does not fit.
    W(R.OOM, "kv cache allocation", r"available memory on node \d+ .*kv cache allocation is less"),
    # Any accelerator's allocator: CUDA, ROCm's HIP, Ascend's NPU, Intel's XPU, MUSA, MLU.
    W(
        R.OOM,
        "out of memory",
        r"(?:cuda|hip|npu|xpu|musa|mlu)(?: error:)? out of memory",
    ),
    W(R.OOM, "outofmemory", r"outofmemoryerror"),
    # vllm-rbln (Rebellions NPUs): its runtime's out-of-memory errors, and the RuntimeError
    # its worker raises from them while compiling and sizing the KV cache at start-up.
    W(R.OOM, "sys_e", r"sys_e(?:nomem: out of memory|busy: lack of device memory)"),
    S(R.OOM, "blocks of kv cache", r"not enough memory for \d+ blocks of kv cache"),
    S(R.NO_KERNEL_IMAGE, "no kernel image", r"no kernel image is available for execution"),
    S(R.NCCL, "watchdog caught", r"watchdog caught collective operation timeout"),
    S(
        R.NCCL,
        "watchdog",
        r"failure detected by watchdog|watchdog thread terminated with exception",
    ),
    S(R.NCCL, "ncclcommwatchdog", r"ncclcommwatchdog\(\)"),
    W(
        R.NCCL,
        "nccl",
        r"nccl error|ncclunhandledcudaerror|ncclsystemerror|ncclinternalerror|ncclinvalidusage",
    ),
    W(R.NCCL, "distbackenderror", r"distbackenderror"),
    W(R.NCCL, "distnetworkerror", r"distnetworkerror"),
    W(R.NCCL, "timed out waiting", r"timed out waiting \d+ ?ms"),
    S(
        R.PORT_IN_USE,
        "failed to listen",
        r"server socket has failed to listen on any local network address",
    ),
    S(R.PORT_IN_USE, "already in use", r"address already in use|port is already in use"),
    S(R.PORT_IN_USE, "errno 98", r"\[errno 98\]"),
    S(R.PORT_IN_USE, "attempting to bind", r"error while attempting to bind on address"),
    S(R.PORT_IN_USE, "is not available in", r"at \d+ is not available in \d+ seconds"),
    W(R.MODEL_NOT_FOUND, "not found for url", r"repository not found for url"),
    W(R.MODEL_NOT_FOUND, "notfounderror", r"(?:repository|localentry|entry)notfounderror"),
    W(R.MODEL_NOT_FOUND, "not a valid model identifier", r"is not a valid model identifier"),
    W(
        R.MODEL_NOT_FOUND,
        "config.json",
        r"does not appear to have a file named config\.json|no such file or dir\w*: .*config\.json",
    ),
    W(
        R.MODEL_NOT_FOUND,
        "can't load",
        r"can't load (?:the configuration|tokenizer|the tokenizer) (?:of|for)",
    ),
    W(R.MODEL_NOT_FOUND, "cannot find any model weights", r"cannot find any model weights"),
    W(R.MODEL_NOT_FOUND, "incorrect path_or_model_id", r"incorrect path_or_model_id"),
    W(
        R.MODEL_NOT_FOUND,
        "repo",
        r"repo id must|gatedrepoerror"
        r"|(?:cannot|trying to) access (?:a )?gated repo",  # huggingface_hub's, transformers
    ),
    W(R.MODEL_NOT_FOUND, "hfvalidationerror", r"hfvalidationerror"),
    # The Hub refusing a model file or its metadata: requests' `HTTPError` and httpx's
    # `HTTPStatusError` that huggingface_hub's `hf_raise_for_status` refines (401/403: a gated
    # or private repo and no token with access; 404: no such repo or file). The Hub's routes
    # (`/resolve/`, `/api/models/`; ModelScope's `/api/v1/models/`) name whose refusal it is.
    W(
        R.MODEL_NOT_FOUND,
        "client error",
        r"\b40[134] client error: [\w ]+ for url: \S+/(?:resolve|api/(?:v1/)?models)/"
        r"|client error '40[134] [\w ]+' for url '\S+/(?:resolve|api/(?:v1/)?models)/",
    ),
    W(R.MODEL_NOT_FOUND, "unrecognized model", r"unrecognized model in"),
    W(R.MODEL_NOT_FOUND, "invalid repository id", r"invalid repository id"),
    # The model is there but cannot be read: a truncated or corrupt checkpoint.
    W(
        R.MODEL_NOT_FOUND,
        "safetensor",
        r"safetensorerror|safetensors_rust\.\w*error",
    ),
    W(R.MODEL_NOT_FOUND, "deserializing header", r"error while deserializing header"),
    # Each row's needle must be in every text its pattern matches: the needle gates the row.
    W(
        R.UNSUPPORTED_MODEL,
        "not supported",
        r"model architectures \[.*\] are not supported|architecture \S+ not supported",
    ),
    W(R.UNSUPPORTED_MODEL, "unsupported architecture", r"unsupported architectures?\b"),
    W(
        R.UNSUPPORTED_MODEL,
        "does not recognize this architecture",
        r"has model type `[^`]+` but transformers does not recognize this architecture",
    ),
    W(
        R.UNSUPPORTED_GPU,
        "compute capability",
        r"bfloat16 is only supported on gpus with compute capability"
        r"|gpus with compute capability below [\d.]+ are not supported",
    ),
    W(R.UNSUPPORTED_GPU, "too old to be supported", r"too old to be supported by the triton gpu"),
    # Argument errors: argparse prints its usage, then `prog: error: ...`, and exits.
    S(R.BAD_ARGS, "usage:", r"^usage: \S+ .*\[-h\]"),
    # A usage dump whose first and last lines were cut: a line of bracketed options alone.
    # Lines of bracketed options alone: two or more, or one indented as usage continues.
    S(
        R.BAD_ARGS,
        "[-",
        rf"^(?:\s{{2,}}(?:{_OPTION}\s*)+|\s*(?:{_OPTION}\s*){{2,}})$",
    ),
    S(
        R.BAD_ARGS,
        ": error: ",
        r": error: (?:unrecognized arguments|ambiguous option|argument \S+: "
        r"|the following arguments are required)",
    ),
    # JIT builds (flashinfer, torch cpp_extension) that fail compile or find no compiler.
    S(
        R.JIT_BUILD,
        "ninja",
        r"ninja build failed|ninja: build stopped|no such file or directory: 'ninja'",
    ),
    S(R.JIT_BUILD, "error building extension", r"error building extension"),
    # The compiler's own words (gcc, nvcc's host compiler): a fatal error in a source file
    # stops the build, and `compilation terminated.` closes it. Only a JIT build compiles.
    S(R.JIT_BUILD, "compilation terminated", r"^compilation terminated\.\s*$"),
    S(
        R.JIT_BUILD,
        ": fatal error: ",
        r"\.(?:cuh?|h|hh|hpp|cc|cpp|cxx):\d+(?::\d+)?: fatal error: ",
    ),
    W(R.JIT_BUILD, "ninja", r"calledprocesserror: command '\['ninja'"),
    W(R.JIT_BUILD, "nvcc", r"\bnvcc\b.*(?:--generate-dependencies|-c |-o )"),
    # A dying interpreter: faulthandler's dump (`File "...", line N in f`, no comma) and the
    # extension module list that follows it, abseil/glog signal reports.
    S(R.FATAL_PYTHON_ERROR, "fatal python error", r"^fatal python error"),
    S(R.FATAL_PYTHON_ERROR, "extension modules: ", r"^extension modules: \w"),
    S(R.FATAL_PYTHON_ERROR, '", line ', r"^\s*file \"[^\"]+\", line \d+ in [\w<>.]+\s*$"),
    S(R.FATAL_PYTHON_ERROR, "received at time=", r"\*\*\* sig\w+ received at time="),
    S(R.CUDA_GRAPH_CAPTURE, "capture cuda graph failed", r"capture cuda graph failed"),
    S(R.WARMUP_FAILED, "warmup error", r"initialization failed\. warmup error"),
    S(R.WARMUP_FAILED, "aborting startup", r"warmup failed; aborting startup"),
    # SGLang's (entrypoints/engine.py), whole or cut where the line (the excerpt) ends.
    S(
        R.ENGINE_INIT,
        "initialization failed",
        _cut("initialization failed. please see the error messages above", keep=25),
    ),
    # SGLang up to 0.1.x: the launcher prints what its router and detokenizer processes
    # answered, only when one did not answer `init ok` (server.py: `router init state: ...`,
    # later `Initialization failed. router_init_state: ...`).
    S(R.ENGINE_INIT, " init state: ", r"^(?:router|detoken) init state: (?!init ok)"),
    S(R.ENGINE_INIT, "_init_state: ", r"^initialization failed\. \w+_init_state: (?!init ok)"),
    S(R.ENGINE_INIT, "initialization failed", r"engine core initialization failed"),
    S(R.ENGINE_INIT, "failed to start", r"(?:enginecore|workerproc) failed to start"),
    S(R.ENGINE_INIT, "timed out waiting", r"timed out waiting for engine core processes to start"),
    S(R.ENGINE_INIT, "engine process failed to start", r"engine process failed to start"),
    S(R.ENGINE_INIT, "initialization failed due to", r"workerproc initialization failed due to"),
    # Triton's Python backend: the model's `initialize` (which builds the engine) raised
    # (pb_stub.cc), so the model failed to load (model_lifecycle.cc). Triton reports it; after
    # ready it may be another model's (a repository poll), so it fails only a start.
    Report(
        R.ENGINE_INIT,
        "failed to initialize python stub",
        r"failed to initialize python stub(?: for auto-complete)?: ",
    ),
    Report(R.ENGINE_INIT, "failed to load '", r"failed to load '[^']+' version \d+: "),
    # A child that died of SIGKILL: said before the generic "died"/"crashed" rows so the line
    # names the kill (and its OOM-killer hint), whichever words surround it.
    S(R.KILLED, "exit code", r"exit code:? -9\b"),
    S(R.CRASH, "hit an exception", r"hit an exception"),
    S(R.CRASH, "exception in worker", r"exception in worker \S+ while processing"),
    S(R.CRASH, "fatal error", r"enginecore encountered a fatal error"),
    Report(R.CRASH, "encountered an issue", r"enginecore encountered an issue"),
    Report(R.CRASH, "output_handler failed", r"output_handler failed"),
    # A process or thread announcing the traceback it dies of ("Process EngineCore_0:").
    Announce("process ", r"^process [\w-]+:$"),
    Announce("exception in ", r"^exception in \w+:$"),
    S(R.CRASH, "died unexpectedly", r"died unexpectedly"),
    # vLLM V0's client finding its engine process gone (MQEngineDeadError's cause).
    S(R.CRASH, "engine process", r"engine process \(pid \d+\) died"),
    # The interpreter itself could not run `python -m MODULE` (runpy's error, printed behind
    # the interpreter's path): the engine never started. Nothing after ready is that server's.
    Report(
        R.CRASH,
        "module specification for",
        r"python[\w.]*: error while finding module specification for '",
    ),
    Report(R.CRASH, "no module named ", r"python[\w.]*: no module named [\w.]+(?:;|\s*$)"),
    # A launcher or Ray saying the server (or the actor running it) is gone.
    # A wrapper (TorchServe, KServe, lemonade's lemond) saying the server it ran never came up.
    S(
        R.CRASH,
        "failed to start",
        r"failed to start (?:the )?model server|server failed to start within (?:the )?timeout",
    ),
    # vLLM V0's execute_model failed (worker/model_runner_base.py, dump_input_when_exception):
    # it dumps the batch, then re-raises `Error in model execution (input dumped to ...)`, and
    # the engine loop dies with it (AsyncLLMEngine is errored from then on).
    S(R.CRASH, "input of failed execution", r"writing input of failed execution to \S+"),
    S(R.CRASH, "error in model execution", r"error in model execution \(input dumped to"),
    # vLLM V1's engine core failing to execute a scheduled batch (logging_utils/dump_input.py,
    # called from core.py's execute_model): it dumps the batch, then the engine core dies.
    S(R.CRASH, "dumping input data", r"dumping input data for v1 llm engine"),
    S(R.CRASH, "actor is dead", r"the actor is dead because its worker process has died"),
    S(R.CRASH, "crashed with exit code", r"crashed with exit code"),
    S(R.CRASH, "watchdog timeout", r"watchdog timeout \("),
    S(R.CRASH, "segmentation fault", r"segmentation fault"),
    S(R.CRASH, "terminate called", r"terminate called after throwing"),
    W(R.CRASH, "illegal memory access", r"an illegal memory access was encountered"),
    W(R.CRASH, "device-side assert", r"device-side assert"),
    # torch_npu's error when an Ascend operator call fails (CANN then logs `PTA call acl api
    # failed` and its EZ/EE code): the NPU's runtime error, as an illegal memory access is CUDA's.
    W(R.CRASH, "npu function error", r"npu function error: call \w+ failed, error code is \d+"),
    S(R.KILLED, "received sigquit from a child", r"received sigquit from a child"),
    S(R.KILLED, "sigquit received", r"sigquit received"),
    S(R.KILLED, "scheduler is dead", r"scheduler is dead"),
    S(R.KILLED, "died during initialization", r"scheduler died during initialization"),
    S(R.KILLED, "terminated with", r"scheduler or dataparallelcontroller \d+ terminated with"),
    S(R.KILLED, "killed", r"^(?:.*: )?line \d+: +\d+ killed\b|^killed$"),
    *(S(r, name.lower(), shell_reports(name)) for r, name in SHELL_DEATHS if name.isascii()),
)
# Rows whose words are not ASCII, read only on the lines that are not (nearly every line an
# engine prints is ASCII: one check spares the table these rows).
NON_ASCII_ROWS: tuple[Signature, ...] = tuple(
    S(r, name.lower(), shell_reports(name)) for r, name in SHELL_DEATHS if not name.isascii()
)
_ALL_ROWS = SIGNATURES + NON_ASCII_ROWS


@dataclass(frozen=True)
class Match:
    reason: Reason
    strong: bool
    report: bool = False  # strong only through report rows
    announce: bool = False  # strong only through rows announcing a traceback to come


def match_signature(message: str) -> Match | None:
    """The reason a line names, if any, and whether it is fatal by itself."""
    lower = message.lower()
    found: Reason | None = None
    strong = own = told = False
    for sig in SIGNATURES if message.isascii() else _ALL_ROWS:
        if sig.needle in lower and sig.pattern.search(message):
            found = found or sig.reason
            strong = strong or sig.strong
            own = own or (sig.strong and not sig.report)
            told = told or (sig.strong and not sig.announce)
    if found is None:
        return None
    return Match(found, strong, strong and not own, strong and not told)


def signature_starts(message: str) -> list[int]:
    """Where in the message each matching row's words begin."""
    lower = message.lower()
    starts = []
    for sig in SIGNATURES if message.isascii() else _ALL_ROWS:
        if sig.needle in lower:
            found = sig.pattern.search(message)
            if found is not None:
                starts.append(found.start())
    return starts
