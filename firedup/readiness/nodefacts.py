"""Everything `fab status` and `fab top` know about a host, gathered on the node in one go.

Shipped like the wait's reader (firedup.readiness.shipping, entry `nodefacts`) and run by the
node's python3 (stdlib and firedup.logscan only, Python 3.8 syntax). The operator names the
facts; this script only runs them, at once, and sends one frame back:

- `current`: the current-run script's output (read first: the other facts need the run);
- `facts`: each named argv, run concurrently (threads), its stdout bounded and base64; an
  argument `@rundir`, `@port` or `@health` is the current run's (a fact that needs a run is
  skipped when there is none);
- `log`: the run's log where it is cheapest: what the wait's reader already learned
  (`<rundir>/reader.json`, nodeside.Summary) and at most a bounded tail after it; a log that
  is not a regular file is refused, and every read is bounded in bytes and time;
- `metrics`: the server's `/metrics`, asked from the node (no port opened to the operator),
  only the engines' own lines;
- `files`: small files of the run directory (the watch's `watch.json`), bounded;
- `live`: engine -> its cheap liveness check, the `probe` fact's `health` (watch.LIVENESS).

Adding a fact is one entry in the operator's `facts` (ops/facts.py) and its parser there.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import threading
import time
from typing import Any

from firedup.readiness import nodelook
from firedup.readiness.nodeproc import SUMMARY_FILE, alive

DONE = ("ready", "failed")  # the verdicts a summary can be trusted with (logscan.Verdict)

FACT_TIMEOUT_S = 10.0
MAX_FACT_BYTES = 1024 * 1024
MAX_FILE_BYTES = 64 * 1024
METRICS_TIMEOUT_S = 3.0
MAX_METRICS_BYTES = 4 * 1024 * 1024
READ_CHUNK = 1024 * 1024


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=FACT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return base64.b64encode(done.stdout[:MAX_FACT_BYTES]).decode("ascii")


class Run:
    """The current run as the node sees it: its directory, port, pid and health URL."""

    def __init__(self, workdir: str, current_out: str) -> None:
        fields = _fields(current_out)
        self.meta: dict[str, Any] = {}
        try:
            self.meta = json.loads(fields.get("meta") or "{}")
        except ValueError:
            self.meta = {}
        pid = fields.get("pid", "").strip()
        self.pid = int(pid) if pid.isdigit() else None
        run_id = str(self.meta.get("run_id") or "")
        self.rundir = os.path.join(workdir, "runs", run_id) if run_id else ""
        self.port = str(self.meta.get("port") or "")
        bind = str(self.meta.get("bind") or "")
        host = bind if bind not in ("0.0.0.0", "::", "") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        self.base = f"http://{host}:{self.port}"

    def arg(self, value: str) -> str | None:
        tokens = {"@rundir": self.rundir, "@port": self.port, "@health": self.base + "/health"}
        if value not in tokens:
            return value
        return tokens[value] or None


class Jobs:
    """Facts running at once, each in a thread; `join` gives name -> base64 stdout (None for
    a fact that could not run, or needs a run when there is none)."""

    def __init__(self, live: dict[str, str]) -> None:
        self.out: dict[str, str | None] = {}
        self.threads: list[threading.Thread] = []
        self.live = live

    def start(self, run: Run | None, facts: dict[str, list[str]]) -> None:
        for name, argv in facts.items():
            args = [run.arg(a) if run else (None if a.startswith("@") else a) for a in argv]
            if any(a is None for a in args):
                self.out[name] = None
                continue
            thread = threading.Thread(target=self._one, args=(name, args, run), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _one(self, name: str, args: list[str], run: Run | None) -> None:
        looked = _look(run, self.live) if name == "probe" and run is not None else None
        self.out[name] = looked if looked is not None else _run(args)

    def join(self) -> dict[str, str | None]:
        for thread in self.threads:
            thread.join(FACT_TIMEOUT_S + 1)
        return self.out


def _look(run: Run, live: dict[str, str]) -> str | None:
    """The `probe` fact from /proc (nodelook), when /proc can tell; `health` from the engine's
    cheap check (`live`: engine -> path), or /health where it has none or it answers 404."""
    if not run.port.isdigit():
        return None
    text = nodelook.look(run.rundir, int(run.port))
    if text is None:
        return None
    path = live.get(str(run.meta.get("engine") or ""), "/health")
    code = nodelook.health(run.base + path)
    if code == "404" and path != "/health":
        code = nodelook.health(run.base + "/health")
    text += f"health={code}\n"
    return base64.b64encode(text.encode()).decode("ascii")


def _read(fh: Any, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size > 0 and time.monotonic() < deadline:
        data = fh.read(min(READ_CHUNK, size))
        if not data:
            break
        chunks.append(data)
        size -= len(data)
    return b"".join(chunks)


def _summary(rundir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(rundir, SUMMARY_FILE), "rb") as fh:
            data = json.loads(fh.read(MAX_FILE_BYTES))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "scan" in data else None


def read_log(run: Run, opts: dict[str, Any]) -> dict[str, Any]:
    """The log's state, read where it is cheapest and never more than the bounds allow.

    With the wait's summary of a ready or failed run: that state, and (only when the server
    is gone) the log's last `tail_bytes` for the cause of its death. Without one: the log in
    order from its start, up to `head_bytes`; past that, its tail the same way. Always the
    last `decode_bytes` for the serving stats of a live server."""
    path = os.path.join(run.rundir, "server.log")
    try:
        info = os.stat(path)
    except OSError:
        return {"size": None}
    if not stat.S_ISREG(info.st_mode):
        return {"size": None, "refused": "the log is not a regular file"}
    deadline = time.monotonic() + float(opts.get("budget_s") or 3.0)
    size, running = info.st_size, alive(run.pid)
    engine = run.meta.get("engine") or None
    summary = _summary(run.rundir)
    done = summary and summary["scan"].get("verdict") in DONE
    out: dict[str, Any] = {"size": size, "alive": running}
    with open(path, "rb") as fh:
        if summary is not None and done and int(summary.get("offset") or 0) <= size:
            out.update(source="summary", scan=summary["scan"], offset=summary["offset"])
            if not running and summary["scan"].get("verdict") == "ready":
                out.update(_tail_verdict(fh, size, int(opts["tail_bytes"]), engine, deadline))
        else:
            scanner = _scanner(engine)
            scanner.feed(_read(fh, min(size, int(opts["head_bytes"])), deadline))
            offset = min(size, int(opts["head_bytes"]))
            complete = offset >= size and time.monotonic() < deadline
            if complete and not running:
                scanner.finish()
            out.update(source="read" if complete else "partial", scan=scanner.state.to_json())
            out["offset"] = offset
            if not complete and not running:
                out.update(_tail_verdict(fh, size, int(opts["tail_bytes"]), engine, deadline))
        if running:
            start = max(0, size - int(opts["decode_bytes"]))
            fh.seek(start)
            out["decode"] = _decode_lines(_read(fh, size - start, deadline), opts)
    return out


def _decode_lines(data: bytes, opts: dict[str, Any]) -> str:
    """The last serving-stats lines of the log's tail (the markers are the operator's)."""
    markers = [str(m) for m in opts.get("decode_markers") or ()]
    text = data.decode("utf-8", "replace").replace("\r", "\n")
    lines = [ln[:1000] for ln in text.split("\n") if any(m in ln for m in markers)]
    return "\n".join(lines[-int(opts.get("decode_lines") or 20) :])


def _tail_verdict(
    fh: Any, size: int, tail_bytes: int, engine: str | None, deadline: float
) -> dict[str, Any]:
    """A dead server's last words: its log's end classified on its own; a failure found
    there replaces the state read before it."""
    start = max(0, size - tail_bytes)
    fh.seek(start)
    scanner = _scanner(engine)
    scanner.feed(_read(fh, size - start, deadline))
    scanner.finish()
    state = scanner.state.to_json()
    return {"tail_scan": state} if state["verdict"] == "failed" else {}


def _scanner(engine: str | None) -> Any:
    """The classifier, imported only when the log must be read (a tenth of a second)."""
    from firedup.engine import Engine
    from firedup.logscan import LogScanner

    return LogScanner(engine=Engine(engine) if engine else None)


def read_metrics(run: Run, opts: dict[str, Any]) -> str | None:
    """The engine's own lines of `/metrics`, asked from the node (no proxy: our loopback)."""
    if not run.port or not alive(run.pid):
        return None
    try:
        code, body = nodelook.http_get(run.base + "/metrics", METRICS_TIMEOUT_S, MAX_METRICS_BYTES)
    except Exception:  # any failure to answer is "no metrics"
        return None
    if code != 200:
        return None
    prefixes = tuple(str(p) for p in opts.get("prefixes") or ())
    text = body.decode("utf-8", "replace")
    return "\n".join(ln for ln in text.splitlines() if ln.startswith(prefixes))


def read_files(run: Run, names: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            with open(os.path.join(run.rundir, os.path.basename(name)), "rb") as fh:
                out[name] = fh.read(MAX_FILE_BYTES).decode("utf-8", "replace")
        except OSError:
            out[name] = None
    return out


def watch_alive(text: str | None) -> bool:
    """The watch that wrote `watch.json` (issue 25) still runs: its pid exists with the start
    time it recorded (/proc/PID/stat field 22), so a watch killed by hand or a reboot that
    left `watching` behind is not taken for one that is on."""
    try:
        data = json.loads(text) if text else {}
        pid, start = int(data["watch_pid"]), str(data["watch_start"])
    except (ValueError, KeyError, TypeError):
        return False
    fields = nodelook.stat_fields(pid)
    return len(fields) > 19 and fields[19] == start and alive(pid)


def gather(options: dict[str, Any]) -> dict[str, Any]:
    facts = {str(k): [str(a) for a in v] for k, v in options["facts"].items()}
    free = {k: v for k, v in facts.items() if not any(a.startswith("@") for a in v)}
    jobs = Jobs({str(k): str(v) for k, v in (options.get("live") or {}).items()})
    jobs.start(None, free)  # what needs no run starts before the run is read
    current = _run([str(a) for a in options["current"]])
    text = base64.b64decode(current).decode("utf-8", "replace") if current else ""
    run = Run(str(options["workdir"]), text) if "meta=" in text else None
    result: dict[str, Any] = {"current": current, "now": time.time()}
    jobs.start(run, {k: v for k, v in facts.items() if k not in free})
    metrics: list[str | None] = [None]
    fetch = None
    if run is not None and options.get("metrics") is not None:
        fetch = threading.Thread(
            target=lambda: metrics.__setitem__(0, read_metrics(run, options["metrics"])),
            daemon=True,
        )
        fetch.start()
    if run is not None:  # while the facts run
        result["log"] = read_log(run, options["log"])
        result["files"] = read_files(run, list(options.get("files") or ()))
        result["watch_alive"] = watch_alive(result["files"].get("watch.json"))
    result["facts"] = jobs.join()
    if fetch is not None:
        fetch.join(METRICS_TIMEOUT_S + 1)
        result["metrics"] = metrics[0]
    return result


def main(argv: list[str]) -> int:
    """argv: NONCE OPTIONS (a JSON object: workdir, current, facts, log, metrics, files, live).
    Ends the process once the frame is out."""
    nonce, options = argv
    out = sys.stdout.buffer
    out.write(b"\nFIREDUP-READER " + nonce.encode() + b"\n")
    body = json.dumps(gather(json.loads(options)), separators=(",", ":")).encode()
    out.write(b"S %d\n" % len(body) + body)
    out.flush()
    sys.stderr.flush()
    os._exit(0)  # all said: no interpreter teardown (modules, threads) before sshd sees the end
