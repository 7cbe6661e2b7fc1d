"""Scenarios of the simulated node and a small runner for them (used by tests and fixtures).

This runs on the developer machine, not on the node: it starts a stand-in engine as its own
process group with a log file, a private GPU-state directory and an events file, and stops it
by that process group only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SIM = Path(__file__).resolve().parent
REPO = SIM.parent
# The node's python: a plain interpreter, as on a real node (the sim needs only the stdlib).
NODE_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
PATCH = REPO / "patches" / "sglang" / "kimi-k25-eagle3-hooks" / "kimi-k25-eagle3-hooks.diff"

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def patched_python(workdir: Path) -> Path:
    """A copy of sim/python with the Kimi-K2.5 EAGLE-3 hooks patch applied (as on a node)."""
    target = workdir / "python-patched"
    if not target.exists():
        shutil.copytree(SIM / "python", target, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(
            ["patch", "-p1", "--quiet", "--forward", "-i", str(PATCH)], cwd=target, check=True
        )
    return target


def launch_argv(scenario: Scenario, port: int) -> list[str]:
    if scenario.engine == "sglang":
        return [NODE_PYTHON, "-m", "sglang.launch_server", *scenario.args, "--port", str(port)]
    vllm = str(SIM / "bin" / "vllm")
    return [NODE_PYTHON, vllm, "serve", *scenario.args, "--port", str(port)]


class SimRun:
    """One launch of a scenario in its own session; stop() kills only that process group."""

    def __init__(self, scenario: Scenario, workdir: Path, speed: float) -> None:
        self.scenario = scenario
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = workdir / scenario.fixture_name
        self.events_path = workdir / "events.jsonl"
        self.blocker: socket.socket | None = None
        pythonpath = patched_python(workdir) if scenario.patched else SIM / "python"
        # A node's python writes .pyc files (stale ones are part of the story): let it.
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("FIREDUP_SIM_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        self.env = {
            **inherited,
            "PYTHONPATH": str(pythonpath),
            "PATH": f"{SIM / 'bin'}:{os.environ.get('PATH', '')}",
            "FIREDUP_SIM_SPEED": str(speed),
            "FIREDUP_SIM_STATE": str(workdir / "gpu-state"),
            "FIREDUP_SIM_EVENTS": str(self.events_path),
            **scenario.env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SimRun:
        if self.scenario.busy_port:
            self.blocker = socket.socket()
            self.blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.blocker.bind(("0.0.0.0", self.port))
            self.blocker.listen()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                launch_argv(self.scenario, self.port),
                cwd=REPO,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        """The log as written: tqdm's '\\r' updates are kept (read_text would turn them to \\n)."""
        return self.log_path.read_bytes().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def http_status(self, path: str, timeout_s: float = 2.0) -> int | None:
        """HTTP status of GET path, or None when nothing accepts connections."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as res:
                return int(res.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except (OSError, TimeoutError):
            return None

    def post_json(self, path: str, payload: dict) -> dict:
        url = f"http://127.0.0.1:{self.port}{path}"
        data = json.dumps(payload).encode()
        req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.loads(res.read())

    def wait_for(self, predicate, timeout_s: float, poll_s: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(poll_s)
        return bool(predicate())

    def wait_text(self, text: str, timeout_s: float) -> bool:
        return self.wait_for(lambda: text in self.log(), timeout_s)

    def wait_exit(self, timeout_s: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def wait_silence(self, quiet_s: float, timeout_s: float) -> bool:
        """True once the log has not grown for quiet_s seconds (the process may be alive)."""
        deadline = time.monotonic() + timeout_s
        size, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            now_size = self.log_path.stat().st_size
            if now_size != size:
                size, since = now_size, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return True
            time.sleep(0.05)
        return False

    def wait_hang(self, quiet_s: float, timeout_s: float) -> bool:
        """A hang: the scenario's texts are out, then the log stays still for quiet_s."""
        deadline = time.monotonic() + timeout_s
        for text in self.scenario.texts:
            if not self.wait_text(text, max(0.0, deadline - time.monotonic())):
                return False
        return self.wait_silence(quiet_s, max(0.0, deadline - time.monotonic()))

    def events(self) -> list[dict]:
        if not self.events_path.exists():
            return []
        return [json.loads(line) for line in self.events_path.read_text().splitlines()]

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM our process group, then SIGKILL it after grace_s."""
        if self.blocker is not None:
            self.blocker.close()
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            if self.wait_exit(grace_s) is not None and not _group_alive(self.pid):
                break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
