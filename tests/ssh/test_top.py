"""`fab top` against a fleet of simulated hosts over real SSH: two starting, one serving
requests, one idle. A program reads `--once --json` (valid against docs/top.schema.json,
counters that match what was sent); a person reads the live table in a real terminal (tmux,
80 and 200 columns): rows fit, the serving host's numbers move, the starting hosts show
their phase."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import FAB, REPO, Sshd, fab, sim_deployment, ssh_host, stop_runs, wait_until
from tests.ssh.test_display import Tmux, tmux  # noqa: F401 - the fixture

pytestmark = pytest.mark.ssh

SCHEMA = json.loads((REPO / "docs" / "top.schema.json").read_text())
MAX_TOKENS = 8


@dataclass
class Fleet:
    inventory: Path
    serving_port: int
    sent: list[dict[str, Any]]  # the usage of every answered request
    stop: threading.Event


def _serve(port: int, sent: list[dict[str, Any]], stop: threading.Event) -> None:
    body = json.dumps({"prompt": "one two three", "max_tokens": MAX_TOKENS}).encode()
    while not stop.is_set():
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions",
            body,
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as reply:
            sent.append(json.loads(reply.read())["usage"])
        stop.wait(0.2)


@pytest.fixture(scope="module")
def fleet(sshd: Sshd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("top")
    deployments, hosts = {}, {}
    for name, speed in (("serving", "4"), ("idle", "4"), ("boot1", "0.04"), ("boot2", "0.04")):
        deployments[name] = sim_deployment(args={"enable-metrics": True})
        hosts[name] = ssh_host(sshd, root / name, name)
        hosts[name]["env"]["FIREDUP_SIM_SPEED"] = speed
    inv = root / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": hosts, "deployments": deployments}))
    deployed = fab("deploy", "--host", "serving,idle", "--inventory", str(inv), timeout_s=180)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    started = fab("start", "--host", "boot1,boot2", "--inventory", str(inv))
    assert started.returncode == 0, started.stdout + started.stderr
    sent: list[dict[str, Any]] = []
    stop = threading.Event()
    port = deployments["serving"]["port"]
    thread = threading.Thread(target=_serve, args=(port, sent, stop), daemon=True)
    thread.start()
    wait_until(lambda: len(sent) >= 3, 30, "the first requests to be answered")
    try:
        yield Fleet(inv, port, sent, stop)
    finally:
        stop.set()
        thread.join(35)
        stop_runs(inv)


def _rows(fleet: Fleet) -> dict[str, dict[str, Any]]:
    done = fab("top", "--once", "--json", "--interval", "1", "--inventory", str(fleet.inventory))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    for row in rows:
        jsonschema.validate(row, SCHEMA)
    return {row["host"]: row for row in rows}


def test_top_once_json_shows_serving_and_starting_hosts(fleet: Fleet) -> None:
    before = len(fleet.sent)
    rows = _rows(fleet)
    after = len(fleet.sent)
    assert set(rows) == {"serving", "idle", "boot1", "boot2"}
    serving = rows["serving"]["metrics"]
    assert rows["serving"]["state"] == "ready"
    # The counters are what was sent: between the answers counted before and after the read
    # (plus the one in flight at each end).
    assert before <= serving["requests_total"] <= after + 1
    generated = serving["generation_tokens_total"]
    assert before * MAX_TOKENS <= generated <= (after + 1) * MAX_TOKENS
    assert serving["generation_tokens_per_s"] > 0
    assert serving["prompt_tokens_per_s"] > 0
    assert serving["ttft_p50_s"] is not None and serving["itl_p95_s"] is not None
    assert rows["idle"]["state"] == "ready"
    assert rows["idle"]["metrics"]["generation_tokens_per_s"] == 0
    for name in ("boot1", "boot2"):
        assert rows[name]["state"] == "starting", rows[name]
        assert rows[name]["phase"] not in (None, "ready")


def _serving_line(screen: str) -> str:
    return next(ln for ln in screen.splitlines() if ln.startswith("serving"))


@pytest.mark.parametrize("width", [80, 200])
def test_top_in_a_real_terminal(fleet: Fleet, tmux: Tmux, width: int) -> None:  # noqa: F811
    tmux.start(width, [FAB, "top", "--interval", "1", "--inventory", str(fleet.inventory)])
    seen: list[str] = []

    def moved() -> bool:
        screen = tmux.screen()
        if "serving" not in screen or "boot2" not in screen:
            return False
        lines = [ln.rstrip() for ln in screen.splitlines() if ln.strip()]
        assert all(len(ln) <= width for ln in lines), f"wider than {width}:\n{screen}"
        seen.append(_serving_line(screen))
        return len(set(seen)) >= 3

    wait_until(moved, 40, "the serving host's numbers to move three times")
    screen = tmux.screen()
    assert "HOST" in screen and "STATE" in screen
    for name in ("boot1", "boot2"):
        line = next(ln for ln in screen.splitlines() if ln.startswith(name))
        assert "starting" in line, screen
    if width >= 200:  # everything fits: latencies, KV and GPUs too
        for header in ("TTFT", "ITL", "KV", "PREFIX", "GPU"):
            assert header in screen, screen
