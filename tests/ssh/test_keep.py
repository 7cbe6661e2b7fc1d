"""After ready (issue 25): the node-side watch keeps the server serving, over a real sshd.

The watch runs on the node in its own session, restarts a transient death in a new run, never
restarts a deterministic one, gives up after `max`, and `fab stop` leaves nothing behind.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import (
    REPO,
    Sshd,
    fab,
    session_members,
    sim_deployment,
    ssh_host,
    stop_runs,
    wait_until,
)

pytestmark = pytest.mark.ssh
SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())
FAULT_FILE = "sim-faults"  # the sim reads faults from this file at each launch (the world changed)


def watch_json(workdir: Path) -> dict[str, Any]:
    try:
        return json.loads((workdir / "current" / "watch.json").read_text())
    except (OSError, ValueError):
        return {}


def watch_pid(workdir: Path) -> int | None:
    try:
        return int((workdir / "watch" / "identity").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def current_id(workdir: Path) -> str:
    return os.path.basename(os.path.realpath(workdir / "current"))


def kill_server(workdir: Path) -> str:
    """SIGKILL the current run's whole process group, as the OOM killer or a user might."""
    run_id = current_id(workdir)
    pid = int((workdir / "current" / "pid").read_text())
    os.killpg(pid, signal.SIGKILL)
    return run_id


def deploy_watched(
    sshd: Sshd,
    tmp_path: Path,
    write_inventory: Callable[..., Path],
    python: str | None = None,
    **watch: Any,
) -> tuple[Path, Path, float]:
    workdir = tmp_path / "node"
    host = ssh_host(sshd, workdir, "d", **({"python": python} if python else {}))
    host["env"] = {**host["env"], "FIREDUP_SIM_FAULT_FILE": str(workdir / FAULT_FILE)}
    deployment = sim_deployment(**{"watch": {"every_s": 0.5, "health_fails": 2}, **watch})
    inv = write_inventory({"n": host}, {"d": deployment})
    began = time.monotonic()
    result = fab("deploy", "--host", "n", "--inventory", str(inv))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "watch started" in result.stdout + result.stderr
    return workdir, inv, time.monotonic() - began


def _generated(view: dict[str, Any]) -> dict[str, Any] | None:
    return view if (view.get("checks") or {}).get("generate") else None


def wait_ready_after(workdir: Path, old: str, timeout_s: float) -> dict[str, Any]:
    return wait_until(
        lambda: (
            current_id(workdir) != old
            and watch_json(workdir).get("state") == "watching"
            and watch_json(workdir)
        ),
        timeout_s,
        "the restarted run to be ready",
    )


def test_a_killed_server_is_running_again_in_a_new_run(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    backoff = 2.0
    workdir, inv, startup = deploy_watched(
        sshd,
        tmp_path,
        write_inventory,
        restart={"on": "failure", "max": 2, "backoff_s": backoff},
        watch={"every_s": 0.5, "health_fails": 2, "generate_every_min": 0.01},
    )
    try:
        view = wait_until(
            lambda: _generated(watch_json(workdir)), 30, "the watch's real generation"
        )
        assert view["state"] == "watching" and view["checks"]["generate"]["ok"], view
        assert view["checks"]["port"] and view["checks"]["health"] == 200
        first = kill_server(workdir)
        killed_at = time.monotonic()
        view = wait_ready_after(workdir, first, backoff + 0.5 + 2 * startup + 10)
        took = time.monotonic() - killed_at
        assert took < backoff + 0.5 + 2 * startup + 10
        new = current_id(workdir)
        assert (workdir / "runs" / first / "server.log").exists()  # the evidence stays
        assert view["restarts"][-1]["from_run"] == first
        assert view["restarts"][-1]["to_run"] == new
        assert view["restarts"][-1]["reason"] == "killed"
        assert "fired up and ready" in (workdir / "runs" / new / "server.log").read_text()
        # The new run lives in its own directory, not in the dead run's (a later deploy may
        # prune that one): launch.sh is the dead run's copy, so it must not name its dir.
        new_pid = int((workdir / "runs" / new / "pid").read_text())
        assert os.readlink(f"/proc/{new_pid}/cwd") == str(workdir / "runs" / new)
        history = fab("history", "--host", "n", "--inventory", str(inv))
        assert history.returncode == 0, history.stderr
        restart_lines = [ln for ln in history.stdout.splitlines() if "restart" in ln]
        assert any(new in ln and "killed" in ln for ln in restart_lines), history.stdout
        status = fab("status", "--host", "n", "--inventory", str(inv), "--json")
        data = json.loads(status.stdout)
        jsonschema.validate(data, SCHEMA)
        watch = data["hosts"][0]["watch"]
        assert watch["on"] and watch["state"] == "watching"
        assert [r["reason"] for r in watch["restarts"]] == ["killed"]
        text = fab("status", "--host", "n", "--inventory", str(inv)).stdout
        assert "watch on (watching, checked" in text and "1 restart(s): killed" in text
    finally:
        stop_runs(inv)


PY38 = sorted(glob.glob("/root/.pyenv/versions/3.8.*/bin/python3.8"))


def test_fab_stop_leaves_nothing_to_come_back(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    """On the oldest python the watch supports (a GPU image's), when this machine has one."""
    workdir, inv, _ = deploy_watched(
        sshd,
        tmp_path,
        write_inventory,
        python=PY38[0] if PY38 else None,
        restart={"on": "failure", "max": 3, "backoff_s": 0},
    )
    try:
        pid = watch_pid(workdir)
        assert alive(pid)
        wait_until(lambda: watch_json(workdir).get("state") == "watching", 30, "the watch")
        if PY38:
            assert Path(f"/proc/{pid}/exe").resolve().name.startswith("python3.8")
        server = int((workdir / "current" / "pid").read_text())
        result = fab("stop", "--host", "n", "--inventory", str(inv))
        assert result.returncode == 0, result.stdout + result.stderr
        # Nothing is left that could bring it back: no watch, no process of the run's session,
        # no other run started, and the watch said why it ended.
        assert not alive(pid) and not alive(server) and session_members(server) == []
        assert len(list((workdir / "runs").iterdir())) == 1
        assert not (workdir / "watch" / "identity").exists()
        assert watch_json(workdir).get("state") == "ended"
        assert "ended the watch" in result.stdout + result.stderr
    finally:
        stop_runs(inv)


def test_a_deterministic_failure_after_a_transient_one_is_not_restarted(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    workdir, inv, _ = deploy_watched(
        sshd, tmp_path, write_inventory, restart={"on": "failure", "max": 2, "backoff_s": 0.5}
    )
    try:
        (workdir / FAULT_FILE).write_text("oom_load\n")  # the next launch no longer fits
        first = kill_server(workdir)
        view = wait_until(
            lambda: (
                current_id(workdir) != first
                and watch_json(workdir).get("state") == "not-restarted"
                and watch_json(workdir)
            ),
            90,
            "the watch to refuse the deterministic failure",
        )
        assert view["death"]["reason"] == "oom"
        assert not view["death"]["restart"]
        assert "deterministic" in view["message"]
        wait_until(lambda: not alive(watch_pid(workdir)), 20, "the watch to exit")
        assert len(list((workdir / "runs").iterdir())) == 2  # one restart, then no more
        history = fab("history", "--host", "n", "--inventory", str(inv))
        assert "deterministic" in history.stdout, history.stdout
    finally:
        stop_runs(inv)


def test_three_deaths_in_a_row_stop_the_watch_with_a_message(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    workdir, inv, _ = deploy_watched(
        sshd, tmp_path, write_inventory, restart={"on": "failure", "max": 2, "backoff_s": 0.2}
    )
    try:
        (workdir / FAULT_FILE).write_text("crash_after_ready\n")  # every new run crashes
        kill_server(workdir)
        view = wait_until(
            lambda: watch_json(workdir).get("state") == "gave-up" and watch_json(workdir),
            120,
            "the watch to give up",
        )
        assert "gave up after 2 failed restart(s) in a row" in view["message"]
        assert view["restarts"][0]["reason"] == "killed"
        assert len(view["restarts"]) == 2
        assert len(list((workdir / "runs").iterdir())) == 3
        wait_until(lambda: not alive(watch_pid(workdir)), 20, "the watch to exit")
        status = fab("status", "--host", "n", "--inventory", str(inv))
        assert "gave up" in status.stdout, status.stdout
    finally:
        stop_runs(inv)


class Receiver:
    """A webhook receiver on loopback: the JSON bodies it was posted, in order."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.bodies: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.raw.append(data)
                outer.bodies.append(json.loads(data))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def events(self) -> list[str]:
        return [b["event"] for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_webhook_gets_ready_restarted_and_gave_up_with_no_secret(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path], monkeypatch: Any
) -> None:
    secret = "hf_watchsecret_4b1d7e"  # the deployment's token, in the server's env
    hook_token = "T0KEN-in-the-hook-url"  # a Slack webhook's URL is a secret itself
    monkeypatch.setenv("H25_HF_TOKEN", secret)
    receiver = Receiver()
    try:
        workdir, inv, _ = deploy_watched(
            sshd,
            tmp_path,
            write_inventory,
            restart={"on": "failure", "max": 1, "backoff_s": 0.2},
            notify={"webhook": receiver.url(f"/hooks/{hook_token}")},
            secrets={"HF_TOKEN": {"env": "H25_HF_TOKEN"}},
        )
        wait_until(lambda: "ready" in receiver.events(), 30, "the ready event")
        # The engine's last words carry the token (an env dump, a URL in a traceback). Written
        # while it is stopped, so its own next write (at its offset) cannot overwrite them.
        os.killpg(int((workdir / "current" / "pid").read_text()), signal.SIGSTOP)
        with open(workdir / "current" / "server.log", "a") as log:
            log.write(
                'Traceback (most recent call last):\n  File "comm.py", line 9, in <module>\n'
                f"RuntimeError: NCCL error: unhandled system error (HF_TOKEN={secret})\n"
            )
        first = kill_server(workdir)
        wait_ready_after(workdir, first, 60)
        kill_server(workdir)
        wait_until(lambda: "gave-up" in receiver.events(), 60, "the gave-up event")
        events = receiver.events()
        assert {"ready", "failed", "restarted", "gave-up"} <= set(events), events
        assert events.count("ready") == 2  # the deploy's run, then the restarted one
        for body in receiver.bodies:
            assert body["text"].startswith("firedup n (d): ")  # Slack shows `text`
            assert body["host"] == "n" and body["deployment"] == "d"
        failed = next(b for b in receiver.bodies if b["event"] == "failed")
        assert failed["reason"] == "nccl" and failed["hint"]
        assert "***" in failed["excerpt"]  # the line was sent, the token was not
        for raw in receiver.raw:
            assert secret.encode() not in raw and hook_token.encode() not in raw
        assert secret not in (workdir / "watch" / "watch.log").read_text()
        assert not (workdir / "watch" / "secrets.env").exists()  # read once, into memory
    finally:
        receiver.close()
        stop_runs(inv)


@pytest.mark.parametrize(
    ("engine", "fault", "reason"),
    [
        ("sglang", "worker_exit_after_ready", "worker_died"),  # /health stays 200: vllm#16259
        ("sglang", "hang_after_ready", "hang"),  # alive, the port open, nothing answers
        ("vllm", "hang_after_ready", "hang"),
    ],
)
def test_a_live_but_broken_server_is_restarted_by_what_the_watch_saw(
    sshd: Sshd,
    tmp_path: Path,
    write_inventory: Callable[..., Path],
    engine: str,
    fault: str,
    reason: str,
) -> None:
    workdir, inv, _ = deploy_watched(
        sshd,
        tmp_path,
        write_inventory,
        restart={"on": "failure", "max": 1, "backoff_s": 0},
        engine=engine,
        tp=2,
        watch={"every_s": 0.5, "health_fails": 2, "health_timeout_s": 1},
    )
    try:
        first = current_id(workdir)
        pid = int((workdir / "current" / "pid").read_text())
        # The watch knows the run's processes from its first check on: the fault comes after.
        wait_until(lambda: (watch_json(workdir).get("checks") or {}).get("procs"), 30, "a check")
        (workdir / FAULT_FILE).write_text(fault + "\n")
        # The fault comes with the next launch; this run gets it by hand, the same way.
        if fault == "worker_exit_after_ready":
            workers = sorted(p for p in _session(pid) if p != pid)
            os.kill(workers[-1], signal.SIGKILL)
        else:
            os.killpg(pid, signal.SIGSTOP)  # a hang: nothing runs, nothing answers
        view = wait_until(
            lambda: current_id(workdir) != first and watch_json(workdir).get("restarts") and
            watch_json(workdir),
            60,
            "the restart",
        )  # fmt: skip
        assert view["restarts"][0]["reason"] == reason
        assert not alive(pid)  # the broken run was stopped before the new one started
        # The new run meets the same fault by itself and gives up (max 1) for the same reason.
        final = wait_until(
            lambda: watch_json(workdir).get("state") == "gave-up" and watch_json(workdir),
            90,
            "the watch to give up",
        )
        assert final["death"]["reason"] == reason, final
    finally:
        stop_runs(inv)


def _session(sid: int) -> list[int]:
    return session_members(sid)


def test_a_healthy_sglang_is_not_taken_for_a_hang_by_a_short_health_timeout(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    """SGLang 0.5's /health answers after a second at the soonest (a generation it looks for
    once a second): asked with a 0.5 s timeout, a healthy server never answers in time. The
    watch asks its cheap liveness check (/server_info: readiness/watch.LIVENESS) instead."""
    watch = {"every_s": 0.3, "health_fails": 2, "health_timeout_s": 0.5}
    workdir, inv, _ = deploy_watched(sshd, tmp_path, write_inventory, watch=watch)
    try:
        first = current_id(workdir)
        codes: list[Any] = []

        def checked() -> bool:
            view = watch_json(workdir)
            codes.append((view.get("checks") or {}).get("health"))
            return len([c for c in codes if c is not None]) >= 8

        wait_until(checked, 30, "eight checks")
        view = watch_json(workdir)
        assert current_id(workdir) == first and not view.get("restarts"), view
        assert view["state"] == "watching" and {c for c in codes if c is not None} == {200}
    finally:
        stop_runs(inv)


def test_a_deploy_during_the_backoff_ends_the_watch_and_wins(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    """The server died, the watch waits out its backoff; the operator deploys meanwhile: the
    deploy ends that watch first (nothing restarts behind its back) and starts its own."""
    workdir, inv, _ = deploy_watched(
        sshd, tmp_path, write_inventory, restart={"on": "failure", "max": 2, "backoff_s": 600}
    )
    try:
        old_watch = watch_pid(workdir)
        kill_server(workdir)
        wait_until(lambda: watch_json(workdir).get("state") == "backoff", 30, "the backoff")
        result = fab("deploy", "--host", "n", "--inventory", str(inv))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "ended the slot's watch" in result.stdout + result.stderr
        assert not alive(old_watch)
        assert watch_pid(workdir) != old_watch and alive(watch_pid(workdir))
        assert len(list((workdir / "runs").iterdir())) == 2  # the dead one and the deploy's
        wait_until(lambda: watch_json(workdir).get("state") == "watching", 30, "the new watch")
        assert watch_json(workdir)["restarts"] == []
    finally:
        stop_runs(inv)
