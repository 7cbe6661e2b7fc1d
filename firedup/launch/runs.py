"""Runs on a node: each launch gets `<workdir>/runs/<run-id>/` and `current` names the live one.

A run directory holds launch.sh, server.log, pid and meta.json. State lives on the node, not
on the operator's laptop, so `fab status`, `fab wait` and `fab stop` work from any machine.
"""

from __future__ import annotations

import json
import posixpath
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from firedup.config.inventory import Deployment, HostSpec
from firedup.config.secrets import SECRETS_FILE, secrets_env_text
from firedup.engine import Engine
from firedup.errors import RemoteCommandError, SlotTakenError, StartError, TransientConnectError
from firedup.launch.keepalive import end_watch
from firedup.launch.render import LaunchScript
from firedup.node.base import Node, operator, parse_fields, run_script, script_argv
from firedup.node.probe import probe_run
from firedup.node.runtime import runtime_for, stop_script
from firedup.node.runtime.oci import container_name

STOP_GRACE_S = 20


@dataclass(frozen=True)
class RunMeta:
    """What a run is: written to meta.json at start, read back by status, wait and stop."""

    run_id: str
    host: str
    deployment: str
    engine: Engine
    port: int
    workdir: str
    script_sha256: str
    started_at: float
    started_by: str
    pid: int | None = None
    bind: str = "127.0.0.1"
    engine_version: str | None = None
    runtime: str = "python"  # where the engine runs: python, podman, docker (node.runtime)
    gpus: tuple[int, ...] | None = None  # the node GPU indices it runs on, as chosen at deploy
    slot: str | None = None  # the host entry's slot (firedup.config.slots)
    image: str | None = None  # in a container: the image it runs, as named at start
    image_id: str | None = None  # the runtime's id of that image (the start script's answer)
    image_digest: str | None = None  # its repository digest, where the runtime keeps one
    # A multi-node deployment's rank (0 decides readiness), of how many, and rank 0's host;
    # a meta.json from before these were written reads as one node.
    node_rank: int = 0
    nnodes: int = 1
    rank0_host: str | None = None

    @property
    def follower(self) -> bool:
        """A rank >= 1: it logs no ready line, its readiness is rank 0's."""
        return self.node_rank > 0

    @property
    def container(self) -> str | None:
        """The container's name (chosen by firedup), None for the node's python."""
        return None if self.runtime == "python" else container_name(self.run_id)

    @property
    def rundir(self) -> str:
        return posixpath.join(self.workdir, "runs", self.run_id)

    @property
    def log_path(self) -> str:
        return posixpath.join(self.rundir, "server.log")

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "engine": self.engine.value}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunMeta:
        data: dict[str, Any] = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        gpus = known.get("gpus")
        known["gpus"] = tuple(int(g) for g in gpus) if isinstance(gpus, list) else None
        return cls(**{**known, "engine": Engine(data["engine"])})


def new_run_id(now: float | None = None, token: str | None = None) -> str:
    """Sortable and unique: UTC time to the second plus a random suffix."""
    stamp = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return f"{stamp:%Y%m%dT%H%M%SZ}-{token or secrets.token_hex(3)}"


def parse_current(stdout: bytes) -> RunMeta | None:
    """Parse current.sh output: `meta=<json>` and `pid=<pid>` (the pid file is the truth)."""
    fields = parse_fields(stdout)
    if not fields.get("meta"):
        return None
    meta = RunMeta.from_json(fields["meta"])
    pid = fields.get("pid", "").strip()
    return replace(meta, pid=int(pid)) if pid.isdigit() else meta


def current_run(node: Node, host: HostSpec) -> RunMeta | None:
    """The run `current` points at, or None when nothing was ever started here."""
    return parse_current(run_script(node, "current", host.workdir, what="read current run").stdout)


def run_by_id(node: Node, host: HostSpec, run_id: str) -> RunMeta:
    if not re.fullmatch(r"[0-9A-Za-z-]+", run_id):
        raise StartError(f"not a run id: {run_id!r}")
    rundir = posixpath.join(host.workdir, "runs", run_id)
    try:
        meta = RunMeta.from_json(node.get(posixpath.join(rundir, "meta.json")))
    except RemoteCommandError:
        raise StartError(f"{host.name}: no run {run_id} under {host.workdir}/runs") from None
    pid = node.run(["cat", "--", posixpath.join(rundir, "pid")], check=False).out.strip()
    return replace(meta, pid=int(pid)) if pid.isdigit() else meta


def is_alive(node: Node, run: RunMeta) -> bool:
    return probe_run(node, run.rundir, run.port, 0, max_bytes=0).alive


def refuse_another_hosts_run(host: HostSpec, live: RunMeta | None, *, force: bool) -> None:
    """Replacing a live run is this host's to do, or anyone's with `force`: another host entry
    sharing the node and workdir (one slot) may own the run `current` names."""
    if live is None or force or live.host == host.name:
        return
    raise SlotTakenError(
        f"{host.name}: the run on this node and workdir ({host.workdir}) is {live.host}'s: "
        f"run {live.run_id} of deployment {live.deployment}, not {host.deployment}; refusing "
        "to replace another host's deployment",
        hint=f"`fab stop --host {live.host}` stops it first; or add --force",
    )


def start_run(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    script: LaunchScript,
    run_id: str,
    *,
    restart: bool = False,
    force: bool = False,
    secrets: Mapping[str, str] | None = None,
    engine_version: str | None = None,
    gpus: tuple[int, ...] | None = None,
    on_progress: Callable[[str], None] = lambda _msg: None,
) -> RunMeta:
    """Upload the launch script (and the 0600 secrets file) into a fresh run directory and
    start it detached. The slot's watch ends first: it must not restart what this replaces."""
    if end_watch(node, host) == "ended":
        on_progress("ended the slot's watch")
    runtime = runtime_for(host, deployment)
    previous = current_run(node, host)
    running = previous is not None and is_alive(node, previous)
    if running and restart:
        refuse_another_hosts_run(host, previous, force=force)
    if running and not restart:
        assert previous is not None
        whose = (
            ""
            if previous.host == host.name
            else f", started by host {previous.host} (deployment {previous.deployment}) on "
            "this same node and workdir"
        )
        raise StartError(
            f"{host.name}: run {previous.run_id} is still running (pid {previous.pid}){whose}",
            hint="use --restart to stop it first, or `fab stop` it",
        )
    meta = RunMeta(
        run_id=run_id,
        host=host.name,
        deployment=deployment.name,
        engine=deployment.engine,
        port=deployment.port,
        workdir=host.workdir,
        script_sha256=script.sha256,
        started_at=time.time(),
        started_by=operator(),
        bind=deployment.bind,
        engine_version=engine_version,
        runtime=runtime.name,
        gpus=gpus,
        slot=host.slot,
        image=script.image,
        **_rank_of(host, deployment),
    )
    if secrets:
        text = secrets_env_text(secrets).encode()
        node.put(text, posixpath.join(meta.rundir, SECRETS_FILE), mode=0o600)
    node.put(script.text.encode(), posixpath.join(meta.rundir, "launch.sh"), mode=0o700)
    if script.inner:
        node.put(script.inner.encode(), posixpath.join(meta.rundir, "engine.sh"), mode=0o700)
    for name, data in runtime.node_files(run_id).items():
        node.put(data, posixpath.join(meta.rundir, name), mode=0o600)
    node.put(meta.to_json().encode(), posixpath.join(meta.rundir, "meta.json"))
    if running and previous is not None:
        # Only now, with the new run's files in place: a failed upload leaves the old running.
        on_progress(f"stopping previous run {previous.run_id}")
        stop_run(node, previous)
    pid, started = _start(node, host, run_id, on_progress, runtime.start_script())
    # meta.json stays as written: the pid file is the truth; the image's id is the history's.
    image_id, digest = (started.get(k) or None for k in ("image_id", "image_digest"))
    meta = replace(meta, pid=pid, image_id=image_id, image_digest=digest)
    on_progress(f"started run {run_id}, pid {pid}")
    return meta


def _rank_of(host: HostSpec, deployment: Deployment) -> dict[str, Any]:
    """The host's place in the deployment's `nodes:` (rank = its index), for meta.json."""
    if host.name not in deployment.nodes:
        return {}
    rank = deployment.nodes.index(host.name)
    return {"node_rank": rank, "nnodes": deployment.nnodes, "rank0_host": deployment.nodes[0]}


def _start(
    node: Node, host: HostSpec, run_id: str, on_progress: Callable[[str], None], script: str
) -> tuple[int, dict[str, str]]:
    """Run the runtime's start script: the pid and the script's other fields. If its answer is
    lost with the connection, ask the node for the pid."""
    try:
        out = run_script(node, script, host.workdir, run_id, what="start").out
    except TransientConnectError as exc:
        pid_file = posixpath.join(host.workdir, "runs", run_id, "pid")
        try:
            found = node.run(["cat", "--", pid_file], check=False).out.strip()
        except TransientConnectError:
            found = ""
        if not found.isdigit():
            raise StartError(
                f"{host.name}: the connection dropped while starting run {run_id} ({exc}); "
                "the server may be running",
                hint=f"`fab status --host {host.name}` shows it; `fab wait --host {host.name}` "
                "follows it",
            ) from None
        on_progress(f"the start's answer was lost with the connection; the node says pid {found}")
        return int(found), {}
    fields = parse_fields(out)
    found = fields.get("pid", "")
    if not found.isdigit():
        raise StartError(f"{host.name}: the start script printed no pid: {out.strip()!r}")
    return int(found), fields


@dataclass(frozen=True)
class StopReport:
    run_id: str
    state: str  # stopped | not-running | no-pid
    killed: tuple[int, ...]  # pids that ignored TERM for the grace period
    left: tuple[int, ...]  # pids still alive after KILL: should always be empty
    members: tuple[int, ...] = ()  # the run's processes when the stop began
    reused: int | None = None  # the recorded pid, now another process's: left alone


def _pids(value: str) -> tuple[int, ...]:
    return tuple(int(p) for p in value.split(",") if p.isdigit())


def stop_run(node: Node, run: RunMeta, *, grace_s: int = STOP_GRACE_S) -> StopReport:
    """TERM the run's process group, KILL what is left after `grace_s`; report what happened."""
    script = stop_script(run.runtime)
    out = run_script(
        node, script, run.rundir, str(grace_s), timeout_s=grace_s + 30, what="stop"
    ).out
    fields = parse_fields(out)
    return StopReport(
        run_id=run.run_id,
        state=fields.get("state", "unknown"),
        killed=_pids(fields.get("killed", "")),
        left=_pids(fields.get("left", "")),
        members=_pids(fields.get("members", "")),
        reused=next(iter(_pids(fields.get("reused", ""))), None),
    )


# How much of a log's end one read brings back: the operator's memory and the link are
# bounded whatever the log holds (one 200 MB line, a log replaced by a device).
LOG_TAIL_MAX_BYTES = 8 * 1024 * 1024


def tail_log(node: Node, run: RunMeta, lines: int, *, max_bytes: int = LOG_TAIL_MAX_BYTES) -> bytes:
    """The last `lines` lines of the run's log, out of at most its last `max_bytes`. A log
    that is not a regular file (a link to /dev/zero, a FIFO) is refused: RemoteCommandError
    naming its type (node/sh/logs.sh)."""
    return run_script(
        node, "logs", run.rundir, str(lines), str(max_bytes), what="read log", timeout_s=30
    ).stdout


def follow_argv(run: RunMeta, lines: int) -> list[str]:
    """The last `lines` lines, then every new one, until the server exits. The stream says
    nothing of a refusal: check with `tail_log(node, run, 0)` first."""
    pid = "" if run.pid is None else str(run.pid)
    return script_argv("logs", run.rundir, str(lines), "0", "follow", pid)
