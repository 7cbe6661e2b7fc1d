"""Issue 16 §1-§3: another local account reads nothing of ours and cannot block us.

The other account (`fdother`) watches the workdir's world-readable parent with inotify and
tries to read every file the moment it appears, then walks the workdir after each step. The
deployment's secret reaches the server's environment and nothing else: no output, and no file
after the launch has read it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.node.ssh import SshNode
from tests.conftest import NODE_PYTHON, Sshd, ssh_host, wait_until
from tests.reliability.helpers import Host
from tests.security.conftest import as_other

pytestmark = [pytest.mark.ssh]

# The other account's reader: on every created or renamed-in file, try to read it at once.
READER = r"""
inotifywait -m -r -q -e create,moved_to,close_write --format '%w%f' -- "$1" 2>&1 |
while IFS= read -r path; do
  printf 'EVENT %s\n' "$path"
  if [ -f "$path" ] && data=$(cat -- "$path" 2> /dev/null); then
    printf 'READ %s %s\n' "$path" "$(printf '%s' "$data" | head -c 300 | tr '\n' ' ')"
  fi
done
"""


@contextmanager
def other_reader(watched: Path) -> Iterator[list[str]]:
    """The other account's inotify reader on `watched`; yields the lines it printed (filled in
    when the block ends)."""
    out = watched.parent / f"reader-{uuid.uuid4().hex[:6]}.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            as_other("bash", "-c", READER, "reader", str(watched)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",  # the checkout may be under /root, which the other account cannot enter
        )
    lines: list[str] = []
    try:
        # inotifywait says nothing when ready (-q); a probe file proves the watch is set.
        def armed() -> bool:
            probe = watched / f".probe-{uuid.uuid4().hex[:6]}"
            probe.write_text("probe")
            probe.chmod(0o644)
            probe.unlink()
            return "READ" in out.read_text() or "probe" in out.read_text()

        wait_until(armed, 10, "the other account's inotify watch")
        yield lines
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(5)
        lines.extend(ln for ln in out.read_text().splitlines() if ".probe-" not in ln)
        out.unlink()


def walk_as_other(workdir: Path) -> str:
    """Everything the other account can read under the workdir: a find + cat of each file."""
    script = 'find "$1" -type f -exec sh -c \'cat -- "$1" && echo "READ $1"\' _ {} \\; 2>&1'
    done = subprocess.run(
        as_other("bash", "-c", script, "walk", str(workdir)),
        capture_output=True,
        text=True,
        cwd="/",
    )
    return done.stdout


def token_wrapper(where: Path) -> Path:
    """The node's python, wrapped to log the token in a URL when it launches an engine, as a
    real engine does with `?token=` URLs (the sim itself never prints its env)."""
    where.mkdir(parents=True, exist_ok=True)
    where.chmod(0o755)
    wrapper = where / "python-logging-token"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -m ] && [ "$2" = sglang.launch_server ]; then\n'
        '  echo "fetching https://hub.example/model?token=${HF_TOKEN:-none}"\n'
        "fi\n"
        f'exec {NODE_PYTHON} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def modes_problems(workdir: Path) -> list[str]:
    """Anything firedup made under the workdir that another user could open (group or other
    bits). sim-state is the simulated GPU driver's, kept there only by the test inventory."""
    problems = []
    for path in [workdir, *workdir.rglob("*")]:
        if "sim-state" in path.parts:
            continue
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue
        if stat.S_IMODE(info.st_mode) & 0o077:
            problems.append(f"{path.relative_to(workdir.parent)} {stat.S_IMODE(info.st_mode):o}")
    return problems


def test_the_other_account_reads_nothing_and_the_secret_goes_nowhere(
    other_user: str, make_host: Callable[..., Host], tmp_path: Path
) -> None:
    secret = f"hf_{uuid.uuid4().hex}"
    env_var = "FIREDUP_SEC_TEST_TOKEN"
    wrapper = token_wrapper(tmp_path.parent / f"bin-{uuid.uuid4().hex[:6]}")
    secrets = {"secrets": {"HF_TOKEN": {"env": env_var}}}
    host = make_host(secrets, FIREDUP_SIM_SPEED="20")
    crashing = Host.create(
        host.sshd, tmp_path / "crash", secrets, {"FIREDUP_SIM_FAULT": "oom_load"}, host.workdir
    )
    for h in (host, crashing):
        data = h.inventory_path.read_text().replace(NODE_PYTHON, str(wrapper), 1)
        h.inventory_path.write_text(data)
    os.environ[env_var] = secret
    outputs: list[str] = []
    try:
        with other_reader(host.workdir.parent) as seen:
            for h, args in (
                (host, ("deploy",)),
                (host, ("status",)),
                (host, ("logs",)),
                (host, ("wait",)),
                (host, ("history",)),
                (host, ("restart",)),
                (crashing, ("deploy", "--restart")),
                (host, ("logs",)),
                (host, ("status", "--json")),
                (host, ("deploy", "--restart")),
            ):
                result = h.cli(*args)
                outputs.append(" ".join(args) + ": " + result.stdout + result.stderr)
                outputs.append(walk_as_other(host.workdir))
            assert "READY" in outputs[0], outputs[0]
            pid = int((host.workdir / "current" / "pid").read_text())
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"HF_TOKEN={secret}".encode() in environ  # it did reach the server
            logs = (host.workdir / "current" / "server.log").read_text()
            assert f"token={secret}" in logs  # and the engine did log it
            problems = modes_problems(host.workdir)
            stop = host.cli("stop")
            outputs.append(stop.stdout + stop.stderr)
            outputs.append(walk_as_other(host.workdir))
    finally:
        del os.environ[env_var]
        crashing.cleanup()
    assert any(host.workdir.name in ln for ln in seen), seen  # the reader was watching
    assert not [ln for ln in seen if ln.startswith("READ")], seen
    leaked = [o[:300] for o in outputs if secret in o]
    assert not leaked, leaked
    assert not [o for o in outputs[1::2] if "READ" in o], outputs[1::2]
    assert not problems, problems
    holders = [
        p for p in host.workdir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
    ]
    # server.log holds what the engine printed (its owner may read it); nothing else does.
    assert {p.name for p in holders} <= {"server.log"}, holders
    assert not list(host.workdir.rglob("secrets.env"))


def test_an_upload_is_never_readable_by_others_not_even_for_an_instant(
    other_user: str, ssshd: Sshd, open_root: Path
) -> None:
    """§1: SshNode.put into a directory others may list (the reader races each create)."""
    shared = open_root / f"up-{uuid.uuid4().hex[:6]}"
    shared.mkdir()
    shared.chmod(0o755)
    inv = parse_inventory(
        {
            "hosts": {"n": ssh_host(ssshd, shared / "node", "d")},
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        shared / "hosts.yaml",
    )
    node = SshNode(inv.host("n"))
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    try:
        with other_reader(shared) as seen:
            for i in range(30):
                node.put(secret.encode() * 2000, str(shared / f"secret-{i}.env"), mode=0o600)
            time.sleep(0)  # the reader's last events are collected when the block ends
            wait_until(
                lambda: all((shared / f"secret-{i}.env").exists() for i in range(30)), 5, "puts"
            )
    finally:
        node.close()
    created = [ln for ln in seen if ln.startswith("EVENT") and ".tmp-" in ln]
    assert created, seen  # the reader saw the temporary files being created
    assert not [ln for ln in seen if ln.startswith("READ")], seen[:5]
    for i in range(30):
        assert stat.S_IMODE((shared / f"secret-{i}.env").stat().st_mode) == 0o600


def test_the_other_account_cannot_block_stop_or_deploy(
    other_user: str, make_host: Callable[..., Host]
) -> None:
    """§3: the lock file is 0600 in a 0700 workdir: another account cannot even open it, so
    its flock blocks nobody."""
    host = make_host()
    first = host.cli("deploy")
    assert first.returncode == 0, first.stdout + first.stderr
    lock = host.workdir / ".lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    # What a colleague tries: hold the lock (read-only or for append) for a minute.
    tries = [
        as_other("flock", "-n", "-s", str(lock), "sleep", "60"),
        as_other("bash", "-c", 'exec 9< "$1" && flock -n 9 && sleep 60', "b", str(lock)),
    ]
    for argv in tries:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd="/")
        assert done.returncode != 0  # refused at once: it cannot open the file
    again = host.cli("deploy", "--restart")
    assert again.returncode == 0, again.stdout + again.stderr
    stopped = host.cli("stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    assert not host.live_runs()


def test_old_copies_of_secrets_env_are_swept(make_host: Callable[..., Host]) -> None:
    """§2: 21 copies after one session, from runs of an older firedup or launches that never
    read theirs: the next locked operation removes every one older than a minute."""
    host = make_host()
    assert host.cli("deploy").returncode == 0
    old = host.workdir / "runs" / "20200101T000000Z-0ld000" / "secrets.env"
    old.parent.mkdir(mode=0o700)
    old.write_text("HF_TOKEN=an-old-token\n")
    os.utime(old, (time.time() - 600, time.time() - 600))
    assert host.cli("stop").returncode == 0
    assert not old.exists()


def test_parents_the_workdir_needs_keep_the_accounts_umask(
    make_host: Callable[..., Host], open_root: Path
) -> None:
    """Only the workdir is ours to close: a missing parent (a new /data) is made as usual."""
    parent = open_root / f"new-{uuid.uuid4().hex[:6]}"
    host = make_host(workdir=parent / "deeper" / "node")
    try:
        stopped = host.cli("stop")  # takes the lock: that makes the workdir
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert stat.S_IMODE(host.workdir.stat().st_mode) == 0o700
        umask = subprocess.run(
            host.sshd.ssh_argv("umask"), capture_output=True, text=True, check=True
        ).stdout
        for made in (parent, parent / "deeper"):
            assert stat.S_IMODE(made.stat().st_mode) == 0o777 & ~int(umask, 8)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_shared_workdir_closed_to_0700_is_said(make_host: Callable[..., Host]) -> None:
    """Issue 28 §5: a team's 2775 workdir is closed to 0700, and the operator is told."""
    host = make_host()
    host.workdir.mkdir()
    host.workdir.chmod(0o2775)
    stopped = host.cli("stop")
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 0, output
    assert stat.S_IMODE(host.workdir.stat().st_mode) & 0o777 == 0o700  # (chmod keeps setgid)
    assert f"the workdir {host.workdir} was mode 2775, open to others: closed to 0700" in output
    again = host.cli("stop")  # once: a closed workdir is not mentioned again
    assert "closed to 0700" not in again.stdout + again.stderr
