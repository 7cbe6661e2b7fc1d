"""A wait over a slow link (150 KB/s, 50 ms each way) with a noisy log: ready and a crash are
reported within seconds of happening, and the log stays on the node.

Before the log was read on the node, every byte of the log had to cross the link before the
ready line could count, and a death read the rest of the log in 4 MiB pieces under a 30 s
timeout: at 150 KB/s a piece never made it, and the crash was never reported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.errors import ServerCrashedError
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.ops.status import RunState, host_status
from firedup.readiness.shipping import FACTS, bundle_arg
from firedup.readiness.wait import WaitOptions, wait_ready
from tests.conftest import REPO, Sshd, sim_deployment, ssh_host
from tests.slowlink import SlowLink, round_trip_s

pytestmark = pytest.mark.ssh

NOISY_PYTHON = str(REPO / "bench" / "nodeside" / "noisy-python")
RATE_BPS = 150_000
NOISE_MB = "3"  # 20 s of this link: far past the bound below


@pytest.fixture
def link(sshd: Sshd) -> Iterator[SlowLink]:
    relay = SlowLink(sshd.port, rate_bps=RATE_BPS, delay_s=0.05)
    yield relay
    relay.close()


def _event_time(path: Path, name: str, timeout_s: float = 5.0) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text().splitlines():
                event = json.loads(line)
                if event["event"] == name:
                    return float(event["t"])
        time.sleep(0.05)
    raise AssertionError(f"the simulator recorded no {name!r} event")


def _node(sshd: Sshd, link: SlowLink, tmp_path: Path, **env: str) -> tuple[SshNode, object]:
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{link.port} {sshd.host_pub}\n")
    host = ssh_host(sshd, tmp_path / "w", "d", port=link.port, known_hosts=str(known))
    host["python"] = NOISY_PYTHON
    host["env"] = {
        **host["env"],
        "FIREDUP_SIM_EVENTS": str(tmp_path / "events.jsonl"),
        "FIREDUP_SIM_SPEED": "1",
        "BENCH_NOISE_MB": NOISE_MB,
        **env,
    }
    inv = parse_inventory(
        {"hosts": {"n": host}, "deployments": {"d": sim_deployment()}}, tmp_path / "hosts.yaml"
    )
    spec = inv.host("n")
    return SshNode(spec), plan_deploy(spec, inv.deployment_for(spec))


@contextmanager
def _running(
    sshd: Sshd, link: SlowLink, tmp_path: Path, **env: str
) -> Iterator[tuple[SshNode, RunMeta]]:
    """A started run of the noisy simulator behind the link; stopped on the way out."""
    node, plan = _node(sshd, link, tmp_path, **env)
    run = start_plan(node, plan)  # type: ignore[arg-type]
    try:
        yield node, run
    finally:
        stop_run(node, run, grace_s=2)
        node.close()


def _mostly_on_the_node(crossed: int, run: RunMeta) -> None:
    log_bytes = Path(run.log_path).stat().st_size
    assert log_bytes > 2_500_000
    assert crossed < 0.05 * log_bytes, f"{crossed} bytes crossed for a {log_bytes} log"


@pytest.mark.parametrize("case", ["ready", "crash"])
def test_a_noisy_wait_over_150_kbps(sshd: Sshd, link: SlowLink, tmp_path: Path, case: str) -> None:
    env = {"FIREDUP_SIM_FAULT": "oom_load"} if case == "crash" else {}
    with _running(sshd, link, tmp_path, **env) as (node, run):
        _, down0 = link.snapshot()
        if case == "ready":
            wait_ready(node, run, WaitOptions(timeout_s=25, tick_s=1.0))
        else:
            with pytest.raises(ServerCrashedError, match="oom"):
                wait_ready(node, run, WaitOptions(timeout_s=25, tick_s=1.0))
        reported = time.time()
        event = _event_time(tmp_path / "events.jsonl", "ready" if case == "ready" else "crashed")
        _, down = link.snapshot()
    assert reported - event < 2.0, f"{case} reported {reported - event:.1f} s after it happened"
    _mostly_on_the_node(down - down0, run)


def test_status_over_150_kbps_reads_the_noisy_log_on_the_node(
    sshd: Sshd, link: SlowLink, tmp_path: Path
) -> None:
    """`fab status` classified the whole log here, 64 KB a round trip: 3 MB of NCCL noise was
    20 s of this link for one host. Now the node's reader reads it and sends one state."""
    with _running(sshd, link, tmp_path) as (node, run):
        wait_ready(node, run, WaitOptions(timeout_s=25, tick_s=1.0))
        _, down0 = link.snapshot()
        status = host_status(node, node.spec)
        _, down = link.snapshot()
    assert status.state is RunState.READY, status
    assert status.signals is not None and status.signals.health == 200
    assert status.scan is not None and status.scan.phase.value == "ready"
    _mostly_on_the_node(down - down0, run)


class Counting:
    """The node, counting the commands status runs on it (each is at least one round trip)."""

    def __init__(self, node: SshNode) -> None:
        self.node, self.commands = node, 0
        self.name, self.spec = node.name, node.spec

    def run(self, *args: object, **kwargs: object) -> object:
        self.commands += 1
        return self.node.run(*args, **kwargs)  # type: ignore[arg-type]

    def stream(self, *args: object, **kwargs: object) -> object:
        self.commands += 1
        return self.node.stream(*args, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.node, name)


def test_status_over_a_100_ms_round_trip_is_one_command(sshd: Sshd, tmp_path: Path) -> None:
    """Every fact of `fab status` (run, lock, history, patches, process, port, liveness,
    GPUs, the log's state, the serving stats) in one command, where it took about six after
    the log. Once connected, as `fab status` is (the command is the connection's first), a
    command costs two round trips (the channel's open, then the exec and its answer: the
    command can't start sooner) plus the node's work (SGLang's /health, a generation looked
    at after a second, is not asked: readiness/watch.LIVENESS).

    What the link costs is held here: each status over the 100 ms relay is paired with one
    over a direct connection to the same sshd just before it, and the relay may add at most
    two round trips (+50 ms) to the pair's median. The node's work itself (about 0.1 s of CPU
    in six processes; its wall time follows this shared machine's load) is the bench's
    measurement, against the issue's 0.3 s: bench/status.py, results in docs/benchmarks.md."""
    relay = SlowLink(sshd.port, delay_s=0.05)
    node, plan = _node(sshd, relay, tmp_path, BENCH_NOISE_MB="0")
    known = Path(node.spec.known_hosts or "")
    known.write_text(known.read_text() + f"[127.0.0.1]:{sshd.port} {sshd.host_pub}\n")
    direct_spec = node.spec.model_copy(update={"port": sshd.port})
    run = start_plan(node, plan)  # type: ignore[arg-type]
    over_relay: list[float] = []
    direct: list[float] = []

    def one_status(spec: object, times: list[float]) -> float:
        fresh = SshNode(spec)  # type: ignore[arg-type]
        fresh._conn.open()  # connected; nothing run on it yet
        rtt = round_trip_s(fresh._conn.client.get_transport())
        counting = Counting(fresh)
        t0 = time.monotonic()
        status = host_status(counting, fresh.spec, plan.deployment)  # type: ignore[arg-type, attr-defined]
        times.append(time.monotonic() - t0)
        fresh.close()
        assert status.state is RunState.READY, status
        assert status.signals is not None and status.signals.health == 200
        assert status.gpus, "the GPUs came in the same round trip"
        assert counting.commands == 1
        return rtt

    try:
        wait_ready(node, run, WaitOptions(timeout_s=25, tick_s=1.0))
        node.close()
        bundle_arg(FACTS)  # built once per firedup install and kept (readiness/bundlecache)
        for _ in range(3):
            one_status(direct_spec, direct)
            rtt = one_status(node.spec, over_relay)
            assert 0.09 < rtt < 0.15, f"the relay's round trip is {rtt:.3f} s"
    finally:
        stop_run(node, run, grace_s=2)
        node.close()
        relay.close()
    link_cost = sorted(a - b for a, b in zip(over_relay, direct, strict=True))[1]
    assert link_cost < 2 * rtt + 0.05, (
        f"over the relay {over_relay} s, direct {direct} s: the link added {link_cost:.3f} s, "
        f"more than two round trips of {rtt:.3f} s"
    )
