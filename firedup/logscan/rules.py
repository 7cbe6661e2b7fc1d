"""What moves a startup forward: phase markers, engine markers and tqdm bars, as data.

Each marker has a literal `needle` tested first (cheap `in` on every line) and an optional
regex for the rare lines that contain it. Strings come from engines.md §2 and §8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from firedup.engine import Engine
from firedup.logscan.model import Phase, Progress


@dataclass(frozen=True)
class Marker:
    needle: str
    phase: Phase
    pattern: re.Pattern[str] | None = None
    engine: Engine | None = None  # None: the marker means the same for every engine
    after: Phase | None = None  # only counts once the phase has reached this one
    per_rank: bool = False  # SGLang repeats it per rank for the EAGLE draft: a repeat is the draft


def _re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


MARKERS: tuple[Marker, ...] = (
    # SGLang (engines.md §2); the 0.5.23 capture dialect reads "Capture draft decode CUDA graph".
    Marker("Init torch distributed begin", Phase.INIT_DISTRIBUTED, per_rank=True),
    Marker("Init nccl begin", Phase.INIT_DISTRIBUTED),  # its name up to 0.1.x, no draft then
    Marker("Init torch begin", Phase.INIT_DISTRIBUTED),  # 0.1.x's router/model_runner.py
    Marker("Load weight begin", Phase.LOADING_WEIGHTS, per_rank=True),
    Marker("Load weight end", Phase.DRAFT_LOADING, _re(r"type=\w*(?:Eagle|EAGLE|Draft|MTP|NextN)")),
    Marker("Load weight end", Phase.LOADING_WEIGHTS, per_rank=True),
    Marker("KV Cache is allocated", Phase.KV_CACHE, per_rank=True),
    Marker("Memory pool end", Phase.KV_CACHE, per_rank=True),
    # Any device (`cuda`, `npu`, `cpu`), any capture (piecewise too); a cut log may keep
    # only the end line.
    Marker("raph begin", Phase.DRAFT_CUDA_GRAPH, _re(r"(?i)capture draft\b.*?graph begin")),
    Marker("raph begin", Phase.CUDA_GRAPH, _re(r"(?i)capture\b.*?graph begin")),
    Marker("raph end", Phase.DRAFT_CUDA_GRAPH, _re(r"(?i)capture draft\b.*?graph end")),
    Marker("raph end", Phase.CUDA_GRAPH, _re(r"(?i)capture\b.*?graph end")),
    Marker("Capture cuda graph num tokens", Phase.CUDA_GRAPH),
    # torch's capture_begin (CUDAGraph.cpp, torch_npu's too) while NCCL work drains: any engine.
    Marker("before starting graph capture", Phase.CUDA_GRAPH),
    Marker("Uvicorn running on", Phase.READY, engine=Engine.VLLM),  # old vLLM, after startup
    Marker("Uvicorn running on", Phase.HTTP_UP),
    Marker("Started server process", Phase.HTTP_UP),
    Marker("Application startup complete", Phase.READY, engine=Engine.VLLM),
    Marker("Application startup complete", Phase.HTTP_UP),
    Marker("model_info HTTP/1.", Phase.WARMUP, _re(r'"GET /(?:get_)?model_info HTTP/1\.\d" 200')),
    Marker("Prefill batch", Phase.WARMUP, engine=Engine.SGLANG, after=Phase.HTTP_UP),
    # Any request answered: the HTTP side is up, whatever the request proves about the engine.
    Marker(" HTTP/1.", Phase.HTTP_UP, _re(r'"(?:GET|POST|HEAD) /\S* HTTP/1\.\d" \d{3}')),
    Marker("The server is fired up and ready to roll", Phase.READY),
    # vLLM (engines.md §8). torch.compile runs inside the memory profiling that sizes the KV
    # cache, so its lines count as kv_cache; vLLM loads its drafter inside loading_weights.
    Marker("world size", Phase.INIT_DISTRIBUTED, _re(r"rank \d+ in world size \d+ is assigned")),
    Marker("world_size=", Phase.INIT_DISTRIBUTED, _re(r"world_size=\d+ rank=\d+")),
    Marker("[Gloo] Rank", Phase.INIT_DISTRIBUTED),
    Marker("NCCL INFO", Phase.INIT_DISTRIBUTED),
    Marker("is using nccl==", Phase.INIT_DISTRIBUTED),
    Marker("Starting to load model", Phase.LOADING_WEIGHTS),
    Marker("Loading model weights took", Phase.LOADING_WEIGHTS),
    Marker("Pre-loading model weights", Phase.LOADING_WEIGHTS),  # Gaudi: `on hpu:0 took ...`
    Marker("Loading weights took", Phase.LOADING_WEIGHTS),
    Marker("Model loading took", Phase.LOADING_WEIGHTS),
    Marker("Unable to collect loaded parameters", Phase.LOADING_WEIGHTS),
    # A loader's report once the checkpoint was read (vLLM's default_loader, SGLang
    # multimodal_gen's component loaders: `Following [text encoder] weights were not ...`).
    Marker(
        "not initialized from checkpoint",
        Phase.LOADING_WEIGHTS,
        _re(r"\bFollowing\b.{0,40}?\bweights were not initialized from checkpoint"),
    ),
    # AWS Neuron compiles the model's graphs while it loads (neuronx-distributed-inference,
    # the vllm-neuron plugin's `load_model`): libneuronxla logs each compile's flags.
    # Its builder's steps (neuronx_distributed's model_builder) and the compiler's own words.
    Marker("Neuron compiler flags:", Phase.LOADING_WEIGHTS),
    Marker(
        "HLO",
        Phase.LOADING_WEIGHTS,
        _re(
            r"^(?:[A-Z]+:[\w.]+:)?"  # Python logging's default `LEVEL:name:` (basicConfig)
            r"(?:Generating HLOs for the following models|Generated all HLOs in"
            r"|(?:Starting|Done) compilation for (?:the priority HLO|all HLOs)"
            r"|Finished Compilation for all HLOs|Done optimizing weight layout for all HLOs)"
        ),
    ),
    Marker(
        "[INFO]: ",
        Phase.LOADING_WEIGHTS,
        _re(
            r"\[INFO\]: (?:Using a cached neff at|Compilation Successfully Completed for \S+\.hlo)"
        ),
    ),
    # vLLM's "init engine (profile, create kv cache, warmup model)" step is one phase here,
    # kv_cache, but for the CUDA graph capture, which has its own: the profiling run that
    # sizes the cache (torch.compile runs inside it: on GPUs, and the CPU backend's "Warming
    # up model for the compilation"), then the cache itself on any device (GPU, CPU, XPU).
    Marker("Dynamo bytecode transform time", Phase.KV_CACHE),
    Marker("torch.compile take", Phase.KV_CACHE),  # "takes" up to ~0.11, "took" since
    Marker("torch.compile took", Phase.KV_CACHE),
    Marker("Memory profiling takes", Phase.KV_CACHE),
    # `Profiling/warmup run took`, Gaudi's `Model profiling run took 504 MiB of device memory`.
    Marker(
        "profiling", Phase.KV_CACHE, _re(r"[Pp]rofiling(?:/warmup)? run took|^Profiling CUDA graph")
    ),
    # Intel llm-scaler's own profiling report, or its note that it estimates the peak instead.
    Marker("[Memory Profiling Analysis]", Phase.KV_CACHE),
    Marker("Skipping profile_run", Phase.KV_CACHE),
    Marker("Available KV cache memory", Phase.KV_CACHE),
    Marker("KV cache size", Phase.KV_CACHE, _re(r"^[A-Z]+ KV cache size: [\d,]+ tokens")),
    Marker("GiB for KV cache", Phase.KV_CACHE),  # the CPU worker's VLLM_CPU_KVCACHE_SPACE
    Marker("reserved for KV cache", Phase.KV_CACHE),  # Gaudi's `Free device memory: ...` split
    Marker(
        "engine took",
        Phase.KV_CACHE,
        _re(r"^(?:Initializing cache engine|init_cache_engine) took"),
    ),
    # The block count on any device: `# GPU blocks: N`, `# cuda blocks:`, `# TPU blocks:`,
    # `# HPU blocks:` (the executor's cache sizing, V0 and the vendor forks).
    Marker(" blocks: ", Phase.KV_CACHE, _re(r"^# [A-Za-z]+ blocks: \d")),
    Marker("KV cache layout", Phase.KV_CACHE, after=Phase.LOADING_WEIGHTS),
    Marker("Warming up model", Phase.KV_CACHE, engine=Engine.VLLM),
    # The step's end, and the API server asking the engine what it serves: the engine got
    # past its KV cache at least (a log cut before the earlier lines still shows where it is).
    Marker("init engine (", Phase.KV_CACHE, _re(r"^init engine \(.*\) took [\d.]+")),
    Marker("upported", Phase.KV_CACHE, _re(r"^Supported[_ ]tasks: \["), engine=Engine.VLLM),
    Marker("Capturing cudagraphs", Phase.CUDA_GRAPH),
    Marker("Capturing the model for CUDA graphs", Phase.CUDA_GRAPH),
    Marker("Graph capturing", Phase.CUDA_GRAPH),  # "finished", and per size "for N tokens"
    # A model's own graph wrapper warming up per size (vllm-omni's decoder wrappers:
    # `Starting CUDA Graph warmup for 11 sizes|shapes`, `Captured (prefix )?CUDA Graph for size=`).
    Marker(
        "CUDA Graph ",
        Phase.CUDA_GRAPH,
        _re(
            r"^\s*(?:Starting CUDA Graph warmup for (?:\d+ (?:sizes|shapes|batch_sizes)|batch siz)"
            r"|Captured (?:\w+ )*CUDA Graph for (?:size|batch)=\d)"
        ),
    ),
    # Backends whose graphs are compiled per shape where CUDA captures them (the runner's
    # `capture_model` / `warmup_model`): TPU/XLA's `Compiling the model with different input
    # shapes` (V0 and V1, also `for prefill:`, `Compiling sample_from_logits with ...`) and
    # tpu-inference's `Precompile all the subgraphs with possible input shapes.`, and Gaudi's
    # per-bucket warm-up `[Warmup][Prompt|Decode|Graph/Decode][203/416] batch_size:..`.
    Marker(
        " input shapes",
        Phase.CUDA_GRAPH,
        _re(
            r"^(?:Compil(?:ing|ed) (?:the model|\w+) with different input shapes"
            r"|Precompile all the subgraphs with possible input shapes)"
        ),
    ),
    # Gaudi's graph budget, each kind's capture summary, the warm-up's end, the sampler's.
    Marker(
        "for HPUGraphs",
        Phase.CUDA_GRAPH,
        _re(r"^Using [\d.]+ \w+/[\d.]+ \w+ of free device memory"),
    ),
    Marker(" captured:", Phase.CUDA_GRAPH, _re(r"^Graph/\w+ captured:\d")),
    Marker("Warmup finished in", Phase.CUDA_GRAPH, _re(r"^Warmup finished in \d+ secs, allocated")),
    Marker(
        "ampler warmup",
        Phase.CUDA_GRAPH,
        _re(r"^(?:Starting sampler warmup|Sampler warmup completed)"),
    ),
    Marker("[Warmup][", Phase.CUDA_GRAPH, _re(r"^\[Warmup\]\[[\w/ ]+\]\[\d+/\d+\] batch_size:\d")),
    Marker("Starting vLLM", Phase.HTTP_UP, _re(r"Starting vLLM (?:API )?server")),
    # Past its startup: V0's MQLLMEngine entering its loop (engine/multiprocessing/engine.py
    # `run_engine_loop`, once the API server's client is up).
    Marker("Starting Engine Loop", Phase.HTTP_UP),
    Marker("Available routes are", Phase.HTTP_UP),
    Marker("Route: /", Phase.HTTP_UP, _re(r"^Route: /\S*, Methods:")),
)

# Lines whose phase depends on the engine: read again once a later line tells the engine.
ENGINE_DEPENDENT = frozenset(m.needle for m in MARKERS if m.engine is not None)

# Bars name the phase they belong to when the phase lines are missing (--log-level warning).
BAR_PHASES: tuple[tuple[str, Phase], ...] = (
    ("Loading safetensors checkpoint shards", Phase.LOADING_WEIGHTS),
    ("Loading pt checkpoint shards", Phase.LOADING_WEIGHTS),
    ("Multi-thread loading shards", Phase.LOADING_WEIGHTS),
    ("Capturing batches", Phase.CUDA_GRAPH),
    ("Capturing CUDA graph", Phase.CUDA_GRAPH),  # "graphs" and the older "graph shapes"
    ("Capturing ", Phase.CUDA_GRAPH),  # any other capture: "Capturing prefill CUDA graphs"
    # vLLM's offline `LLM.generate`/`chat` stepping its engine through prompts (llm.py's
    # `_run_engine`): the engine is up and serving them (an eval harness, a batch job).
    ("Processed prompts", Phase.READY),
)

BAR_LABELS = tuple(needle for needle, _ in BAR_PHASES)

# Printed once per launch, first thing: seen again after progress, a new launch has begun.
# SGLang prints `server_args=ServerArgs(...)` up to 0.5.18 and `server_args={...}` from 0.5.19.
LAUNCH_BANNERS = (
    "server_args=ServerArgs(",
    "server_args={",
    "vLLM API server version",
    "vLLM server version",
)
# vLLM 0.11+ prints its version in a logo unless VLLM_DISABLE_LOG_LOGO (api_utils.py
# `log_version_and_model`): ` ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0` (a paste may
# squeeze its blanks). `Starting vLLM (API) server` is no banner: it comes once the engine is up.
_LOGO_VERSION = re.compile(r"\s*▄▄ ?▄█ █ +█ +█ ▀▄▀ █ +version \S")


BANNER_STARTS = (*LAUNCH_BANNERS, "▄▄", " ▄▄")  # a cheap first test for launch_banner


def launch_banner(message: str) -> bool:
    """Whether the message is an engine's first line of a run (its version or its arguments)."""
    if message.startswith(LAUNCH_BANNERS):
        return True
    return "▀▄▀" in message and _LOGO_VERSION.match(message) is not None


ENGINE_MARKERS: tuple[tuple[str, Engine], ...] = (
    ("server_args=ServerArgs(", Engine.SGLANG),
    ("server_args={", Engine.SGLANG),
    ("fired up and ready to roll", Engine.SGLANG),
    ("Scheduler hit an exception", Engine.SGLANG),
    ("Received sigquit from a child", Engine.SGLANG),
    ("Init torch distributed begin", Engine.SGLANG),
    ("Load weight begin", Engine.SGLANG),
    ("KV Cache is allocated", Engine.SGLANG),
    ("sglang", Engine.SGLANG),
    ("SGLang", Engine.SGLANG),
    ("vLLM", Engine.VLLM),
    ("vllm serve", Engine.VLLM),
    ("vllm.entrypoints", Engine.VLLM),
    ("Initializing a V1 LLM engine", Engine.VLLM),
    ("Initializing an LLM engine", Engine.VLLM),
    ("LLM engine (v", Engine.VLLM),  # "Initializing a V0 LLM engine (v0.8.5) with config"
    ("non-default args:", Engine.VLLM),
    ("█ ▀▄▀ █", Engine.VLLM),  # its logo's version line (launch_banner)
    # The API server's launcher lists its routes; its chat layer names the template format.
    ("Available routes are", Engine.VLLM),
    ("Route: /", Engine.VLLM),
    ("Detected the chat template content format", Engine.VLLM),
    ("EngineCore", Engine.VLLM),
)
# vLLM process-name prefixes; "(pid=N)" alone is Ray's and says nothing about the engine.
VLLM_PROCESSES = ("APIServer", "EngineCore", "VllmWorker", "Worker_", "RayWorkerWrapper")
_SGLANG_RANKS = re.compile(r"[A-Z_]+\d+(?: [A-Z_]+\d+)*$")

BAR = re.compile(
    r"\s*(?:(?P<label>[^|]*?):\s*)?(?P<pct>\d{1,3})%(?: Completed)?\s?\|(?:[^|]*\|)?"
    r"\s*(?P<done>\d+)/(?P<total>\d+) \[(?P<times>[^\]]*)(?P<close>\])?"
)


def parse_bar(message: str) -> tuple[Progress, int, bool] | None:
    """A tqdm bar reading, where it ends in `message`, and whether it is complete (`]`)."""
    if "%" not in message or "/" not in message:
        return None
    match = BAR.match(message)
    if match is None:
        return None
    done, total = int(match.group("done")), int(match.group("total"))
    if done > total:
        return None
    label = (match.group("label") or "").strip()
    rate, eta = bar_times(match.group("times"))
    progress = Progress(label, done, total, rate, eta)
    return progress, match.end(), match.group("close") is not None


# The label may carry its own readings (`Capturing batches (bs=2 avail_mem=14.40 GB)`).
_CUT_BAR = re.compile(r"(?P<label>[A-Z][\w ().,=-]*?):\s*\d{1,3}%\|")


def cut_bar_phase(message: str) -> Phase | None:
    """The phase a bar names when only its label and percentage survived (a pasted log whose
    redraws were flattened or cut before `done/total`)."""
    for match in _CUT_BAR.finditer(message):
        phase = bar_phase(match.group("label"))
        if phase is not None:
            return phase
    return None


def bar_times(times: str) -> tuple[str, str]:
    """tqdm's `elapsed<remaining, rate` as (rate, eta); empty where tqdm has no estimate yet."""
    spent, _, rest = times.partition(",")
    rate = rest.strip() if "?" not in rest else ""
    _, _, eta = spent.partition("<")
    eta = eta.strip() if "?" not in eta else ""
    return rate, eta


@lru_cache(maxsize=256)  # a bar redraws thousands of times under a handful of labels
def bar_phase(label: str) -> Phase | None:
    for needle, phase in BAR_PHASES:
        if label.startswith(needle):
            return phase
    return None


def detect_engine(message: str, ranks: str) -> Engine | None:
    if ranks:
        if ranks.startswith(VLLM_PROCESSES):
            return Engine.VLLM
        if _SGLANG_RANKS.match(ranks):
            return Engine.SGLANG
    for needle, engine in ENGINE_MARKERS:
        if needle in message:
            return engine
    return None
