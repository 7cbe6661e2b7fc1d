"""The real-engine tier's fixtures: the real vLLM for the CPU, the tiny model, one vLLM at a time.

- `real_engine` (session): `scripts/real-engine-setup.sh` builds or reuses the cached venv
  (~/.cache/firedup/real-engine/venv-<pins hash>) and prints its python; the tiny models are
  made next to it by tests/realengine/make_model.py, cached by that script's hash. Where the
  engine cannot be installed the test FAILS with the setup's own message, never skips.
- `vllm_slot` (per test): holds `flock /tmp/firedup-real-vllm.lock` for the whole test (every
  real vLLM on this machine does), and afterwards removes what vLLM left behind: the run's
  `/tmp/vllm_dist_<uuid>` (named in its log) and the `/dev/shm/psm_*` segments a killed server
  leaves. Which segments are ours: those that appeared while we held the machine's vLLM lock,
  owned by our uid, created after the test began. Nobody else starts a vLLM while we hold it,
  and a file present before the test, or another user's, is never touched.
- `cpu_host`: an inventory host over the suite's real sshd whose python is the real venv's,
  with nothing in it about CPUs (the point of the tier: firedup finds out by itself).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import (
    REPO,
    Sshd,
    fab,
    free_port,
    session_members,
    ssh_host,
    wait_until,
)

LOCK = Path("/tmp/firedup-real-vllm.lock")
MAKE_MODEL = REPO / "tests" / "realengine" / "make_model.py"
SETUP = REPO / "scripts" / "real-engine-setup.sh"
# The environment every real vLLM of the tier runs with (../shared/real-engine.md).
QUIET = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
LEFTOVER_GLOBS = (("/dev/shm", "psm_*"), ("/tmp", "vllm_dist_*"))


@dataclass(frozen=True)
class RealEngine:
    python: str
    model: Path  # head_dim 32: serves
    model_hd16: Path  # head_dim 16: starts, passes /health, dies on its first request


def _model(python: str, cache: Path, head_dim: int) -> Path:
    digest = hashlib.sha256(MAKE_MODEL.read_bytes()).hexdigest()[:12]
    out = cache / f"model-{digest}-hd{head_dim}"
    if not (out / "config.json").is_file():
        done = subprocess.run(
            [python, str(MAKE_MODEL), str(out), "--head-dim", str(head_dim)],
            capture_output=True,
            text=True,
            env={**os.environ, **OFFLINE},
            timeout=300,
        )
        if done.returncode != 0:
            pytest.fail(f"real-engine tier: making the tiny model failed:\n{done.stderr[-2000:]}")
    return out


@pytest.fixture(scope="session")
def real_engine() -> RealEngine:
    done = subprocess.run([str(SETUP)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        pytest.fail(
            f"real-engine tier: {SETUP.name} failed (exit {done.returncode}):\n"
            f"{done.stderr.strip()[-3000:]}",
            pytrace=False,
        )
    python = done.stdout.strip().splitlines()[-1]
    cache = Path(python).parents[2]  # <cache>/venv-<hash>/bin/python -> <cache>
    return RealEngine(python, _model(python, cache, 32), _model(python, cache, 16))


def _ours_since(started: float) -> set[Path]:
    uid = os.getuid()
    found = set()
    for folder, pattern in LEFTOVER_GLOBS:
        for path in Path(folder).glob(pattern):
            try:
                st = path.lstat()
            except OSError:
                continue
            if st.st_uid == uid and st.st_mtime >= started - 1:
                found.add(path)
    return found


def _named_in_logs(root: Path) -> set[Path]:
    """The `/tmp/vllm_dist_<uuid>` files our runs' logs name (distributed_init_method)."""
    names = set()
    for log in root.rglob("server.log"):
        text = log.read_text(errors="replace")
        for part in text.split("file:///tmp/vllm_dist_")[1:]:
            uuid = part[:32]
            if uuid.isalnum():
                names.add(Path(f"/tmp/vllm_dist_{uuid}"))
    return names


def _end_our_runs(root: Path) -> None:
    """Whatever a failed test left running: every process of every run under `root` (each
    run is a session of its own, its leader's pid in the run's `pid` file), before the lock
    is let go, so the next test's vLLM never shares the machine with it."""
    sessions = []
    for pidfile in root.rglob("runs/*/pid"):
        text = pidfile.read_text().strip()
        if text.isdigit():
            sessions.append(int(text))
    for sid in sessions:
        for pid in session_members(sid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(session_members(s) for s in sessions), 30, "our runs to end")


@contextmanager
def holding_vllm_slot(root: Path) -> Iterator[Path]:
    """The machine's one real vLLM is ours until the block ends; then what it left goes."""
    with LOCK.open("a") as lock:
        asked = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_EX)
        waited = time.monotonic() - asked
        if waited > 1:
            print(f"\nwaited {waited:.0f} s for {LOCK} (another real vLLM on this machine)")
        started = time.time()
        before = {p for folder, pattern in LEFTOVER_GLOBS for p in Path(folder).glob(pattern)}
        try:
            yield root
        finally:
            _end_our_runs(root)
            leftovers = (_ours_since(started) - before) | _named_in_logs(root)
            for path in leftovers:
                path.unlink(missing_ok=True)


@pytest.fixture
def vllm_slot(tmp_path: Path) -> Iterator[Path]:
    """This test's turn with the machine's one real vLLM, and its cleanup afterwards."""
    with holding_vllm_slot(tmp_path) as root:
        yield root


def real_env(engine: RealEngine, root: Path, kv_gib: int = 1) -> dict[str, str]:
    """The launch environment of a real vLLM in the tier: offline, quiet, 1 GiB of KV cache,
    its torch.compile cache in the test's own directory."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": str(kv_gib),
        "VLLM_CACHE_ROOT": str(root / "vllm-cache"),
        **QUIET,
        **OFFLINE,
    }


def real_deployment(model: Path, *, eager: bool = True, **overrides: Any) -> dict[str, Any]:
    """The tiny model on vLLM: float32 as it was saved (vLLM's default downcast to bfloat16
    dies with SIGILL on the first request on CPUs whose AMX the kernel does not grant)."""
    args: dict[str, Any] = {"dtype": "float32"}
    if eager:
        args["enforce-eager"] = True
    return {
        "engine": "vllm",
        "model": str(model),
        "port": free_port(),
        "context_length": 512,
        "args": args,
        "ready_timeout_s": 400,
        **overrides,
    }


def cpu_host(
    sshd: Sshd, engine: RealEngine, root: Path, deployment: str = "tiny", **overrides: Any
) -> dict[str, Any]:
    """An inventory host entry for the real vLLM over the real sshd. No key in it says "CPU":
    no nvidia-smi on the PATH and the vllm-cpu build are all firedup sees."""
    env = {**real_env(engine, root), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    return ssh_host(sshd, root / "node", deployment, python=engine.python, env=env, **overrides)


def deploy_events(inventory: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """`fab deploy --json` of the host `cpu`: the finished command and its events."""
    done = fab("deploy", "--host", "cpu", "--inventory", str(inventory), "--json", timeout_s=500)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, events


def write_inventory(root: Path, hosts: dict[str, Any], deployments: dict[str, Any]) -> Path:
    path = root / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": hosts, "deployments": deployments}))
    return path
