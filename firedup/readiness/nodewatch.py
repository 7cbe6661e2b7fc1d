"""The watch: keeps a ready server serving, on the node, long after the SSH session ended.

Started detached in its own session next to the server (firedup/node/sh/watch_start.sh), by
a deploy that reached ready, and shipped like the log reader (firedup.readiness.shipping):
stdlib and firedup.logscan only, Python 3.8. Every `every_s` it checks the run: its leader
and its session's processes, the port held by one of them, /health from the node, the log
after ready (the classifier's fatal lines: evidence for the reason, not a trigger), and, when
asked, one real generation every N minutes. What it sees goes to `<rundir>/watch.json`
(format: docs/operations.md), where `fab status` reads it.

When the run dies (or hangs, or loses its health) it decides by reason
(firedup.readiness.keep_policy): restart a transient death in a new run directory under the
node's lock, leave a deterministic one alone and say why, give up after `max` failed attempts
in a row. A TERM (`fab stop`, a deploy) ends it between two steps: a start under way is
finished first, so the one who ended the watch finds that run in `current` and stops it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

from firedup.engine import Engine
from firedup.logscan import HINTS, LogScanner, Reason, Verdict
from firedup.readiness import keep_policy as policy
from firedup.readiness import nodewatch_act as act
from firedup.readiness import nodewatch_checks as checks

READ_BYTES = 1024 * 1024  # log read per check: a burst is worked through over a few checks
STARTING_EVERY_S = 1.0  # how often a restarted run is looked at until it is ready
MAX_RESTARTS_KEPT = 20
EXCERPT_LINES = 8  # of the lines that prove a death's reason, in its event and watch.json
LOST_CHECKS = 2  # a worker gone at this many checks in a row is dead, not a blink
WATCH_HINTS = {
    policy.HANG: "the server stopped answering /health; the log's last lines say what it did",
    policy.HEALTH_LOST: "/health answers with an error; the log says why",
    policy.WORKER_DIED: "a process of the server (a worker, a rank) died while the server lived",
    policy.PORT_LOST: "no process of the run holds the port any more",
    policy.GENERATE_FAILED: "a real one-token generation failed twice in a row",
    policy.NOT_READY: "the restarted run did not become ready within its ready timeout",
    "killed": "the server's process ended without a word in its log (SIGKILL, the OOM killer)",
}


class Run:
    """One run as the watch follows it: its identity, its log, what the checks found."""

    def __init__(self, workdir: str, run_id: str, engine: str, offset: int) -> None:
        self.run_id = run_id
        self.dir = os.path.join(workdir, "runs", run_id)
        self.pid, self.start = checks.read_identity(os.path.join(self.dir, "identity"))
        self.scanner = LogScanner(engine=Engine(engine) if engine else None)
        self.offset = offset
        self.members0: set[int] = set()
        self.lost_checks = 0
        self.health_fails = 0
        self.gen_fails = 0
        self.gen_at = time.monotonic()
        self.started_at = time.monotonic()
        self.ready_at: float | None = None
        self.checks: dict[str, Any] = {}
        self.health_told = False

    def alive(self) -> bool:
        return self.pid is not None and checks.leader_alive(self.pid, self.start)

    def read_log(self, limit: int = READ_BYTES) -> None:
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as fh:
                fh.seek(self.offset)
                data = fh.read(limit)
        except OSError:
            return
        self.offset += len(data)
        self.scanner.feed(data)

    def read_to_end(self) -> None:
        before = -1
        while self.offset != before:
            before = self.offset
            self.read_log()
        self.scanner.finish()

    def fatal(self) -> str | None:
        state = self.scanner.state
        if state.verdict is Verdict.FAILED and state.reason is not None:
            return state.reason.value
        return None


class Watch:
    def __init__(self, workdir: str, cfg: dict[str, Any], secrets_text: str) -> None:
        self.workdir, self.cfg, self.secrets_text = workdir, cfg, secrets_text
        self.mask = act.Masker(secrets_text, [str((cfg.get("notify") or {}).get("webhook", ""))])
        self.notifier = act.Notifier(cfg.get("notify"), self.mask, self.log)
        self.ending = threading.Event()
        self.every_s = float(cfg.get("every_s") or 10.0)
        self.restart = cfg.get("restart")
        self.attempt = 0
        self.restarts: list[dict[str, Any]] = []
        self.state = "watching"
        self.death: dict[str, Any] | None = None
        self.message = ""
        self.my_start = (checks.stat_fields(os.getpid()) or [""] * 20)[19]
        self.run = Run(workdir, str(cfg["run_id"]), str(cfg.get("engine") or ""), 0)
        self.run.offset = self._log_size(self.run)
        self.run.ready_at = time.time()

    # -- the loop -----------------------------------------------------------------------

    def main(self) -> int:
        self.became_ready(self.run, restarted=False)
        while not self.ending.is_set():
            found = self.look()
            if found is not None and self.after_death(*found):
                break
            self.write_state()
            self.ending.wait(STARTING_EVERY_S if self.state == "starting" else self.every_s)
        if self.ending.is_set() and self.state not in ("gave-up", "not-restarted"):
            self.state, self.message = "ended", "the watch was ended (fab stop or a deploy)"
            self.write_state()
        self.log(self.message)
        self.notifier.close()
        return 0

    def look(self) -> tuple[str, str] | None:
        run = self.run
        if self.state == "starting":
            return self.look_starting(run)
        return self.look_ready(run)

    def look_ready(self, run: Run) -> tuple[str, str] | None:
        """(reason, detail) when the ready run died, hangs or lost its health."""
        alive = run.alive()
        run.read_log()
        if not alive:
            run.read_to_end()
            gone = len(run.members0 - {run.pid}) if run.lost_checks else 0
            reason = policy.reason_of_death(run.fatal(), gone, run.health_told)
            return reason, "the server's process (pid %s) is gone" % run.pid
        members = checks.session_members(run.pid or 0)
        if not run.members0:
            run.members0 = members
        lost = run.members0 - members
        run.lost_checks = run.lost_checks + 1 if lost else 0
        port = checks.holds_port(members, int(self.cfg["port"]))
        code = self.health()
        run.health_fails = 0 if code == 200 else run.health_fails + 1
        run.checks = checks.check_map(len(members), len(lost), port, code, run.health_fails)
        run.checks["fatal"] = run.fatal()
        self.maybe_generate(run)
        return self.judge(run, lost, port, code)

    def judge(self, run: Run, lost: set[int], port: bool, code: int) -> tuple[str, str] | None:
        if run.lost_checks >= LOST_CHECKS:
            return policy.WORKER_DIED, "pids %s of the run are gone" % sorted(lost)
        if run.health_fails >= int(self.cfg.get("health_fails") or 3):
            reason = policy.HANG if code == 0 else policy.HEALTH_LOST
            if not run.health_told:
                run.health_told = True
                self.notifier.send(
                    "health-lost",
                    self.say(
                        "health lost (%s, %d checks in a row)"
                        % (code or "no answer", run.health_fails)
                    ),
                    **self.about(run, reason),
                )
            if self.restart:
                return reason, "/health: %s at %d checks in a row" % (
                    code or "no answer",
                    run.health_fails,
                )
        elif code == 200:
            run.health_told = False
        if not port and run.health_fails:
            return policy.PORT_LOST, "no process of the run listens on port %s" % self.cfg["port"]
        if run.gen_fails >= 2 and self.restart:
            return policy.GENERATE_FAILED, str(run.checks.get("generate"))
        self.message = "watching run %s: %s" % (
            run.run_id,
            "healthy" if code == 200 else "health %s" % (code or "no answer"),
        )
        self.maybe_reset(run)
        return None

    def look_starting(self, run: Run) -> tuple[str, str] | None:
        alive = run.alive()
        run.read_log()
        ready = run.scanner.state.verdict is Verdict.READY
        if alive and ready and self.health() == 200:
            self.state = "watching"
            run.ready_at = time.time()
            self.became_ready(run, restarted=True)
            return None
        if not alive:
            run.read_to_end()
            reason = run.fatal() or "killed"
            return reason, "the restarted run exited before ready"
        timeout = float(self.cfg.get("ready_timeout_s") or 1800)
        if time.monotonic() - run.started_at > timeout:
            return policy.NOT_READY, "not ready after %.0fs" % timeout
        self.message = "run %s is starting (%s)" % (run.run_id, run.scanner.state.phase.value)
        return None

    # -- the checks that ask the server ------------------------------------------------

    def health(self) -> int:
        url = str(self.cfg.get("health_url") or "")
        if not url:
            return 200  # nothing to ask: the process and the port decide
        return checks.health(url, float(self.cfg.get("health_timeout_s") or 5.0))

    def maybe_generate(self, run: Run) -> None:
        every = float(self.cfg.get("generate_every_min") or 0) * 60
        if not every or time.monotonic() - run.gen_at < every:
            return
        run.gen_at = time.monotonic()
        ok, ms, why = checks.generate(
            str(self.cfg.get("base_url")), str(self.cfg.get("model") or ""), 60.0
        )
        run.gen_fails = 0 if ok else run.gen_fails + 1
        run.checks["generate"] = {"at": time.time(), "ok": ok, "ms": round(ms), "error": why}

    def maybe_reset(self, run: Run) -> None:
        stable = float((self.restart or {}).get("reset_after_s") or 600)
        if self.attempt and run.ready_at and time.time() - run.ready_at >= stable:
            self.log("run %s served %.0fs: the restart count starts again" % (run.run_id, stable))
            self.attempt = 0

    # -- deaths and restarts -----------------------------------------------------------

    def after_death(self, reason: str, detail: str) -> bool:
        """Decide and act on a death; True when the watch is done."""
        run = self.run
        ready_before = run.ready_at is not None
        what, why = policy.decide(reason, ready_before, self.restart, self.attempt)
        hint = self.hint(reason)
        excerpt = [self.mask(line) for line in run.scanner.state.excerpt[-EXCERPT_LINES:]]
        self.death = {
            "at": time.time(),
            "reason": reason,
            "detail": self.mask(detail),
            "hint": hint,
            "restart": what == "restart",
            "why": why,
            "excerpt": excerpt,
        }
        self.history("watch", "failed", run.run_id, "%s (%s)" % (why, detail), hint)
        self.notifier.send(
            "failed",
            self.say("run %s failed: %s. %s" % (run.run_id, why, hint)),
            **self.about(run, reason, hint=hint, decision=what, excerpt="\n".join(excerpt)),
        )
        if what != "restart":
            self.state, self.message = what, why
            if what == "gave-up":
                self.notifier.send("gave-up", self.say(why), **self.about(run, reason))
            elif self.restart:
                self.notifier.send("not-restarted", self.say(why), **self.about(run, reason))
            self.write_state()
            return True
        return self.restart_after(run, reason, why)

    def restart_after(self, old: Run, reason: str, why: str) -> bool:
        self.state, self.message = "backoff", why
        self.write_state()
        self.ending.wait(float((self.restart or {}).get("backoff_s") or 0))
        while not self.ending.is_set():
            lock = act.Lock(self.script("lock_hold"), self.workdir, "restart", old.run_id)
            if lock.held:
                try:
                    return self.start_new(old, reason)
                finally:
                    lock.release()
            self.message = "waiting for the node's lock to restart: %s" % lock.busy
            self.write_state()
            self.ending.wait(self.every_s)
        return False

    def start_new(self, old: Run, reason: str) -> bool:
        """Under the lock: a new run of the same launch.sh. True when the watch is done."""
        current = os.path.basename(os.path.realpath(os.path.join(self.workdir, "current")))
        if current != old.run_id:
            self.state = "ended"
            self.message = "run %s is current now, not %s: not restarting" % (current, old.run_id)
            return True
        if old.alive():
            act.bash(self.script("stop"), "stop", old.dir, "20", timeout_s=90)
        new_id = act.new_run_id()
        act.copy_run(self.workdir, old.run_id, new_id, self.secrets_text)
        started = act.bash(self.script("start"), "start", self.workdir, new_id)
        self.attempt += 1
        limit = int((self.restart or {}).get("max") or 0)
        note = "after %s in run %s (attempt %d of %d)" % (reason, old.run_id, self.attempt, limit)
        self.restarts = [
            *self.restarts,
            {
                "at": time.time(),
                "from_run": old.run_id,
                "to_run": new_id,
                "reason": reason,
                "detail": self.death["detail"] if self.death else "",
            },
        ]
        self.restarts = self.restarts[-MAX_RESTARTS_KEPT:]
        self.state, self.message = "replaced", "restarted as run %s %s" % (new_id, note)
        self.write_state()
        self.run = Run(self.workdir, new_id, str(self.cfg.get("engine") or ""), 0)
        self.state, self.message = "starting", "run %s started %s" % (new_id, note)
        ok = started.get("pid", "").isdigit()
        self.history(
            "restart",
            "started" if ok else "failed",
            new_id,
            note,
            "" if ok else started.get("_err", ""),
        )
        self.notifier.send(
            "restarted",
            self.say("restarted run %s as %s %s" % (old.run_id, new_id, note)),
            **self.about(self.run, reason),
        )
        self.write_state()
        return False

    def became_ready(self, run: Run, restarted: bool) -> None:
        self.message = "watching run %s: ready" % run.run_id
        if restarted:
            last = self.restarts[-1] if self.restarts else {}
            note = "after %s in run %s" % (last.get("reason", "?"), last.get("from_run", "?"))
            self.history("restart", "ready", run.run_id, note, "")
        self.notifier.send(
            "ready",
            self.say("run %s is ready%s" % (run.run_id, " (restarted)" if restarted else "")),
            **self.about(run, ""),
        )
        self.write_state()

    # -- what it writes ----------------------------------------------------------------

    def write_state(self) -> None:
        run = self.run
        data = {
            "v": 1,
            "run_id": run.run_id,
            "watch_pid": os.getpid(),
            "watch_start": self.my_start,
            "state": self.state,
            "checked_at": time.time(),
            "every_s": self.every_s,
            "ready_at": run.ready_at,
            "checks": run.checks,
            "restart": self.restart,
            "attempt": self.attempt,
            "restarts": self.restarts,
            "death": self.death if self.state != "starting" else None,
            "message": self.mask(self.message),
        }
        try:
            act.write_json(os.path.join(run.dir, "watch.json"), data)
        except OSError as exc:  # a full disk: the watch goes on, status shows an old check
            self.log("cannot write watch.json: %s" % exc)

    def history(self, action: str, outcome: str, run_id: str, reason: str, detail: str) -> None:
        base = dict(self.cfg.get("history") or {})
        line = act.history_line(
            base,
            action=action,
            outcome=outcome,
            run_id=run_id,
            reason=self.mask(reason)[:2000],
            detail=self.mask(detail)[:2000],
        )
        done = act.bash(self.script("history_append"), "history_append", self.workdir, line)
        if done["_rc"] != "0":
            self.log("cannot append to the history: %s" % done["_err"])

    def hint(self, reason: str) -> str:
        try:
            return HINTS.get(Reason(reason)) or ""
        except ValueError:
            return WATCH_HINTS.get(reason, "")

    def about(self, run: Run, reason: str, **extra: Any) -> dict[str, Any]:
        return dict(
            host=self.cfg.get("host"),
            deployment=self.cfg.get("deployment"),
            run_id=run.run_id,
            reason=reason,
            **extra,
        )

    def say(self, text: str) -> str:
        return "firedup %s (%s): %s" % (self.cfg.get("host"), self.cfg.get("deployment"), text)

    def script(self, name: str) -> str:
        return str(self.cfg["scripts"][name])

    def log(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sys.stdout.write("%s %s\n" % (stamp, self.mask(text)))
        sys.stdout.flush()

    @staticmethod
    def _log_size(run: Run) -> int:
        try:
            return os.path.getsize(os.path.join(run.dir, "server.log"))
        except OSError:
            return 0


def main(argv: list) -> int:
    """argv: the marker `firedup-watch`, then WORKDIR. Reads WORKDIR/watch/config.json, and
    WORKDIR/watch/secrets.env once (then removes it: the secrets stay in this memory only)."""
    workdir = argv[1]
    home = os.path.join(workdir, "watch")
    with open(os.path.join(home, "config.json")) as fh:
        cfg = json.load(fh)
    secrets_text = ""
    path = os.path.join(home, "secrets.env")
    if os.path.exists(path):
        with open(path) as fh:
            secrets_text = fh.read()
        os.unlink(path)
    watch = Watch(workdir, cfg, secrets_text)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: watch.ending.set())
    return watch.main()
