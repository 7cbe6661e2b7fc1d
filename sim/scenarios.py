"""The scenarios of the simulated node: launches, their environment and what they must show.

Run one with simrun.SimRun (tests/sim and record_fixtures.py do); this runs on the developer
machine, not on the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KIMI = ("--model-path", "sim/models/kimi-k25", "--tp", "8", "--trust-remote-code")
EAGLE3 = (
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "sim/models/kimi-k25-eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--mem-fraction-static",
    "0.9",
)
TINY = ("--model-path", "sim/models/tiny-llama")
OVERRIDE = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}


@dataclass(frozen=True)
class Scenario:
    """expect: "ready" (serves), "exit" (dies by itself), "hang" (alive and silent)."""

    name: str
    engine: str  # "sglang" or "vllm"
    args: tuple[str, ...]
    expect: str
    env: dict[str, str] = field(default_factory=dict)
    patched: bool = False  # run on a copy of sim/python with the Kimi EAGLE-3 patch applied
    busy_port: bool = False  # another process listens on the port before the launch
    texts: tuple[str, ...] = ()  # substrings the log must contain

    @property
    def fixture_name(self) -> str:
        return f"{self.engine}-{self.name}.log"


def _sg(name: str, args: tuple[str, ...], expect: str, *texts: str, **kw: object) -> Scenario:
    return Scenario(name, "sglang", args, expect, texts=texts, **kw)  # type: ignore[arg-type]


def _vl(name: str, args: tuple[str, ...], expect: str, *texts: str, **kw: object) -> Scenario:
    return Scenario(name, "vllm", args, expect, texts=texts, **kw)  # type: ignore[arg-type]


CTX_ERROR = "Target model's context_length (262144) is greater than the derived context_length"
ATTR = "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute"
SIGQUIT = "Received sigquit from a child process. It usually means the child failed."
FIRED = "The server is fired up and ready to roll!"

SCENARIOS: tuple[Scenario, ...] = (
    _sg("tiny-ready", TINY, "ready", FIRED),
    # The story, launch 1: explicit --context-length, no override -> fails before loading.
    _sg(
        "kimi-eagle3-ctxlen-explicit",
        (*KIMI, *EAGLE3, "--context-length", "262144"),
        "exit",
        CTX_ERROR,
        "Scheduler hit an exception",
        SIGQUIT,
    ),
    # Without --context-length the same error comes after the target load and capture
    # (reachable only on a patched node: unpatched, the AttributeError comes first).
    _sg(
        "kimi-eagle3-ctxlen-derived",
        (*KIMI, *EAGLE3),
        "exit",
        "Capture cuda graph end",
        CTX_ERROR,
        SIGQUIT,
        patched=True,
    ),
    # The story, launch 2: override set, unpatched 0.5.9 -> AttributeError at target capture.
    _sg(
        "kimi-eagle3-attributeerror",
        (*KIMI, *EAGLE3),
        "exit",
        f"{ATTR} 'set_eagle3_layers_to_capture'",
        SIGQUIT,
        env=OVERRIDE,
    ),
    # With CUDA graphs off, ModelRunner itself calls the hook after the KV pool (0.5.9 :621).
    _sg(
        "kimi-eagle3-attributeerror-nograph",
        (*KIMI, *EAGLE3, "--disable-cuda-graph"),
        "exit",
        "Memory pool end",
        f"{ATTR} 'set_eagle3_layers_to_capture'",
        SIGQUIT,
        env=OVERRIDE,
    ),
    # The story, launch 3: override and patch -> ready after the draft capture.
    _sg(
        "kimi-eagle3-ready",
        (*KIMI, *EAGLE3),
        "ready",
        "Capture draft cuda graph begin",
        "Overriding the draft model's max_position_embeddings to 262144.",
        FIRED,
        env=OVERRIDE,
        patched=True,
    ),
    _sg(
        "kimi-eagle3-ready-0.5.10",
        (*KIMI, *EAGLE3),
        "ready",
        FIRED,
        env={**OVERRIDE, "FIREDUP_SIM_SGLANG_VERSION": "0.5.10"},
    ),
    _sg(
        "kimi-eagle3-ready-0.5.23",
        (*KIMI, *EAGLE3),
        "ready",
        "Capture target verify CUDA graph begin",
        "Capture draft decode CUDA graph end",
        FIRED,
        env={**OVERRIDE, "FIREDUP_SIM_SGLANG_VERSION": "0.5.23"},
    ),
    _sg(
        "tiny-ctxlen-user",
        (*TINY, "--context-length", "4096"),
        "exit",
        "User-specified context_length (4096) is greater than the derived context_length (2048)",
    ),
    _sg(
        "tiny-port-busy",
        TINY,
        "exit",
        "[Errno 98] error while attempting to bind on address",
        busy_port=True,
    ),
    _sg(
        "missing-model",
        ("--model-path", "/nonexistent/model"),
        "exit",
        "Incorrect path_or_model_id: '/nonexistent/model'",
    ),
    _sg(
        "kimi-tp1-oom",
        ("--model-path", "sim/models/kimi-k25"),
        "exit",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "Received sigquit",
    ),
    _sg(
        "fault-oom_load",
        (*TINY, "--tp", "2"),
        "exit",
        "torch.OutOfMemoryError",
        SIGQUIT,
        env={"FIREDUP_SIM_FAULT": "oom_load"},
    ),
    _sg(
        "fault-oom_capture",
        (*TINY, "--tp", "2"),
        "exit",
        "Capture cuda graph failed:",
        "Possible solutions:",
        SIGQUIT,
        env={"FIREDUP_SIM_FAULT": "oom_capture"},
    ),
    _sg(
        "fault-nccl_error",
        (*TINY, "--tp", "2"),
        "exit",
        "RuntimeError: NCCL error:",
        SIGQUIT,
        env={"FIREDUP_SIM_FAULT": "nccl_error"},
    ),
    _sg(
        "fault-nccl_hang",
        (*TINY, "--tp", "2"),
        "hang",
        "Init torch distributed begin.",
        env={"FIREDUP_SIM_FAULT": "nccl_hang"},
    ),
    _sg(
        "fault-rank_killed",
        (*TINY, "--tp", "2"),
        "hang",
        "Load weight begin.",
        env={"FIREDUP_SIM_FAULT": "rank_killed"},
    ),
    _sg(
        "fault-rank_killed-0.5.10",
        (*TINY, "--tp", "2"),
        "exit",
        "Rank 1 scheduler died during initialization (exit code: -9)",
        env={"FIREDUP_SIM_FAULT": "rank_killed", "FIREDUP_SIM_SGLANG_VERSION": "0.5.10"},
    ),
    _sg(
        "fault-warmup_fail",
        TINY,
        "exit",
        "Initialization failed. warmup error:",
        env={"FIREDUP_SIM_FAULT": "warmup_fail"},
    ),
    _sg(
        "fault-slow_capture",
        (*KIMI, *EAGLE3),
        "ready",
        FIRED,
        env={**OVERRIDE, "FIREDUP_SIM_FAULT": "slow_capture"},
        patched=True,
    ),
    _sg(
        "fault-crash_after_ready",
        (*TINY, "--tp", "2"),
        "exit",
        FIRED,
        "CUDA error: an illegal memory access was encountered",
        "SIGQUIT received.",
        env={"FIREDUP_SIM_FAULT": "crash_after_ready"},
    ),
    _vl("tiny-ready", ("sim/models/tiny-llama",), "ready", "Application startup complete."),
    _vl(
        "kimi-eagle3-ready",
        (
            "sim/models/kimi-k25",
            "--tensor-parallel-size",
            "8",
            "--trust-remote-code",
            "--speculative-config",
            '{"method":"eagle3","model":"sim/models/kimi-k25-eagle3","num_speculative_tokens":3}',
        ),
        "ready",
        "Application startup complete.",
    ),
    _vl(
        "tiny-port-busy",
        ("sim/models/tiny-llama",),
        "exit",
        "OSError: [Errno 98] Address already in use",
        busy_port=True,
    ),
    _vl(
        "tiny-max-model-len",
        ("sim/models/tiny-llama", "--max-model-len", "4096"),
        "exit",
        "User-specified max_model_len (4096) is greater than the derived max_model_len",
    ),
    _vl(
        "fault-oom_load",
        ("sim/models/tiny-llama", "-tp", "2"),
        "exit",
        "WorkerProc failed to start.",
        "Engine core initialization failed.",
        env={"FIREDUP_SIM_FAULT": "oom_load"},
    ),
    _vl(
        "fault-nccl_hang",
        ("sim/models/tiny-llama", "-tp", "2"),
        "hang",
        "Initializing a V1 LLM engine",
        env={"FIREDUP_SIM_FAULT": "nccl_hang"},
    ),
    _vl(
        "fault-rank_killed",
        ("sim/models/tiny-llama", "-tp", "2"),
        "exit",
        "Worker proc VLLM::Worker_TP1 died unexpectedly (exit code: -9)",
        env={"FIREDUP_SIM_FAULT": "rank_killed"},
    ),
    _vl(
        "fault-crash_after_ready",
        ("sim/models/tiny-llama", "-tp", "2"),
        "exit",
        "Application startup complete.",
        "died unexpectedly",
        env={"FIREDUP_SIM_FAULT": "crash_after_ready"},
    ),
)


def by_name(engine: str, name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.engine == engine and scenario.name == name:
            return scenario
    raise KeyError(f"{engine}-{name}")
