"""The node-side log reader says what the operator-side reader says, on every recorded log;
it is shipped whole (stdlib only) and runs on the Python versions GPU images carry; where it
cannot run, the boot script hands over to `tail` so the operator reads the log itself.

Each case runs the command exactly as the wait sends it (`python3 -c BOOT BUNDLE ...`) in a
real interpreter, on a fixture file, with no pid (read to the end, then stop)."""

from __future__ import annotations

import ast
import glob
import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from firedup.engine import Engine
from firedup.logscan import LogScanner
from firedup.readiness.logfeed import scan_from_json
from firedup.readiness.shipping import FrameParser, bundle, bundle_arg, reader_argv
from firedup.readiness.shipsource import imports, shipped_text
from tests.conftest import NODE_PYTHON

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
CASES = sorted(LOGS.glob("*/*.log"))


def _engine(log: Path) -> str:
    sidecar = log.with_name(log.name[: -len(".log")] + ".expected.json")
    expected = json.loads(sidecar.read_text()) if sidecar.exists() else {}
    return str(expected.get("engine") or "")


def _run_reader(python: str, log: Path, engine: str = "") -> tuple[FrameParser, list[Any], bytes]:
    options = {"log": str(log), "offset": 0, "pid": None, "engine": engine, "look": None}
    argv = reader_argv(options, "n0nce", ["tail", "-c", "+1", str(log)])
    proc = subprocess.run([python, *argv[1:]], capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    parser = FrameParser("n0nce")
    states, raw = parser.feed(b"login shell chatter\n" + proc.stdout)
    return parser, states, raw


def _operator_side(log: Path, engine: str) -> tuple[dict[str, Any], list[str]]:
    scanner = LogScanner(engine=Engine(engine) if engine else None)
    data = log.read_bytes()
    scanner.feed(data)
    scanner.finish()
    lines = data.decode("utf-8", "replace").replace("\r", "\n").split("\n")
    return scanner.state.to_json(), [ln[:400] for ln in lines if ln.strip()][-15:]


def test_every_fixture_gets_the_same_verdict_on_the_node_as_here() -> None:
    def one(log: Path) -> str | None:
        engine = _engine(log)
        parser, states, _ = _run_reader(NODE_PYTHON, log, engine)
        if parser.mode != "node" or not states or not states[-1].get("exited"):
            return f"{log.name}: mode {parser.mode}, {len(states)} states"
        final = states[-1]
        want, tail = _operator_side(log, engine)
        if final["scan"]["hint"] is not None:  # the hint texts stay with the operator
            return f"{log.name}: the node sent a hint: {final['scan']['hint']}"
        if {**final["scan"], "hint": want["hint"]} != want or final["tail"] != tail:
            return f"{log.name}: node {final['scan']} != here {want}"
        if final["offset"] != log.stat().st_size:
            return f"{log.name}: node read {final['offset']} of {log.stat().st_size} bytes"
        if scan_from_json(final["scan"]).to_json() != want:  # the operator's value round-trips
            return f"{log.name}: the state does not survive the trip"
        return None

    with ThreadPoolExecutor(max_workers=2) as pool:
        problems = [p for p in pool.map(one, CASES) if p]
    assert len(CASES) > 100
    assert not problems, "\n".join(problems)


def test_the_bundle_is_the_reader_and_the_classifier_and_small() -> None:
    names = set(bundle())
    assert {"firedup.readiness.nodeside", "firedup.logscan.scanner", "firedup.engine"} <= names
    assert not any(n.startswith(("firedup.config", "firedup.node", "firedup.ops")) for n in names)
    assert bundle()["firedup"] == (True, "")  # parent packages ship empty
    assert bundle()["firedup.logscan.hints"] == (False, "HINTS = {}\n")  # the operator's words
    watch = bundle("firedup.readiness.nodewatch")  # the watch writes hints: it has them all
    assert "HINTS = {}" not in watch["firedup.logscan.hints"][1]
    # One argument per wait: far below MAX_ARG_STRLEN's 128 KiB (the look from /proc, issue 24,
    # moved probe.sh's work into the bundle).
    assert len(bundle_arg()) < 40_000


def _old_python(version: str) -> str | None:
    """A real interpreter of that version (pyenv's builds, or the system's; not pyenv shims)."""
    built = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    return built[0] if built else shutil.which(f"python{version}", path="/usr/local/bin:/usr/bin")


def test_every_shipped_module_parses_as_python_3_8() -> None:
    """The syntax GPU images' pythons accept (3.8 and up). Not the whole story: a name that
    3.8's stdlib lacks (enum.StrEnum) fails at import; the test below runs a real 3.8."""
    for name, (_, source) in bundle().items():
        ast.parse(source, filename=name, feature_version=(3, 8))


def test_the_reader_runs_under_python_3_8() -> None:
    python = _old_python("3.8")
    if python is None:
        pytest.skip("no python3.8 on this machine")
    log = LOGS / "sglang" / "oom_load.log"
    if not log.exists():
        log = CASES[0]
    parser, states, _ = _run_reader(python, log, _engine(log))
    assert parser.mode == "node"
    assert states[-1]["scan"] == _operator_side(log, _engine(log))[0]


@pytest.mark.parametrize("version", ["3.6", "3.7", "3.8"])
def test_an_older_python_reads_on_the_node_or_hands_over_to_tail(version: str) -> None:
    """Never a broken wait: the reader runs, or the plain log streams from `tail`."""
    python = _old_python(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    log = CASES[0]
    parser, states, raw = _run_reader(python, log)
    if version < "3.8" or parser.mode == "raw":
        assert (parser.mode, states, raw) == ("raw", [], log.read_bytes())
    else:
        assert states[-1]["scan"] == _operator_side(log, "")[0]


NOISE = b"gpu-node:4242:4300 [0] NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/CUMEM/read\n"


@pytest.mark.parametrize("case", ["capture_failed_cuda_oom", "no_prefix_tp1_ready"])
def test_a_verdict_behind_a_burst_of_noise_is_sent_before_the_backlog(
    tmp_path: Path, case: str
) -> None:
    """4.5 MB of NCCL INFO lines between the launch and the verdict: the reader peeks at the
    log's end and sends the named cause (or the ready line) first; its final state is still
    the in-order classifier's, the same as here."""
    lines = (LOGS / "sglang" / f"{case}.log").read_bytes().splitlines(keepends=True)
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(lines[:3]) + NOISE * (4_500_000 // len(NOISE)) + b"".join(lines[3:]))
    _, states, _ = _run_reader(NODE_PYTHON, log, "sglang")
    ahead = [i for i, s in enumerate(states) if s.get("ahead")]
    want = "failed" if "oom" in case else "ready"
    assert ahead, "no early verdict was sent"
    first = states[ahead[0]]
    assert first["scan"]["verdict"] == want
    assert first["offset"] < log.stat().st_size // 2  # sent long before the reader got there
    if want == "failed":
        assert first["scan"]["reason"] == "oom"
    assert scan_from_json(states[-1]["scan"]).to_json() == _operator_side(log, "sglang")[0]


def test_relative_imports_are_followed_into_the_bundle() -> None:
    found = imports("from .model import A\nfrom . import rules\nfrom ..engine import E", "a.b")
    assert {"a.b.model", "a.b.rules", "a.engine"} <= found


def test_once_reads_to_the_logs_end_with_the_server_alive_and_stops(tmp_path: Path) -> None:
    """`fab status`'s read: the whole log as it is now, while the server runs (its pid alive:
    this test's own), then one state with a look and the reader exits; not "exited"."""
    ready = LOGS / "sim" / "sglang-kimi-eagle3-ready.log"
    log = tmp_path / "server.log"
    log.write_bytes(ready.read_bytes())
    look = {"script": "echo alive=1", "args": [], "health_url": "", "tick_s": 1.0}
    options = {"log": str(log), "offset": 0, "pid": os.getpid(), "engine": "", "look": look}
    argv = reader_argv({**options, "once": True}, "n0nce", ["true"])
    proc = subprocess.run(["python3", *argv[1:]], capture_output=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    parser = FrameParser("n0nce")
    states, _ = parser.feed(proc.stdout)
    assert parser.mode == "node" and states
    last = states[-1]
    assert last["offset"] == log.stat().st_size and not last.get("exited")
    assert scan_from_json(last["scan"]).verdict.value == "ready"
    assert last["probe"].startswith("alive=1")
    assert not any("probe" in s for s in states[:-1])  # one look, at the end


def test_a_server_that_exited_unreaped_is_dead_to_the_reader(tmp_path: Path) -> None:
    """A zombie main pid (exited, its parent not yet reaping: a container without an init)
    ends the follow like a vanished one; probe.sh already counted zombies as gone."""
    log = tmp_path / "server.log"
    log.write_bytes((LOGS / "sim" / "sglang-fault-oom_capture.log").read_bytes())
    server = subprocess.Popen(["true"])  # not waited for until the end: a zombie meanwhile
    try:
        stat = Path(f"/proc/{server.pid}/stat")
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        options = {"log": str(log), "offset": 0, "pid": server.pid, "engine": "", "look": None}
        argv = reader_argv(options, "n0nce", ["true"])
        proc = subprocess.run(["python3", *argv[1:]], capture_output=True, timeout=10)
    finally:
        server.wait()
    states, _ = FrameParser("n0nce").feed(proc.stdout)
    assert states and states[-1].get("exited") and states[-1]["scan"]["reason"] == "oom"


def test_the_shipped_sources_keep_every_line_number_without_docstrings_or_comments() -> None:
    source = (
        'def f():\n    """Dé—jà\n    vu."""  # why\n    return 1  # one\n\n\nclass C:\n    "x"\n'
    )
    out, _ = shipped_text(source, "p")
    assert out.count("\n") == source.count("\n")
    assert "Dé" not in out and "why" not in out and "vu" not in out
    namespace: dict[str, object] = {}
    exec(compile(out, "t", "exec"), namespace)
    assert namespace["f"]() == 1  # type: ignore[operator]
    for name, (_pkg, text) in bundle().items():
        compile(text, name, "exec")  # every shipped module still compiles


def test_a_hash_inside_any_string_literal_is_kept_and_only_comments_go() -> None:
    source = (
        'x = "a # b"  # c\n'
        "y = f\"{x}#{x!r}\" + f'{x:#x}'  # d\n"
        'z = b"#"  # e\n'
        'w = """\n# inside\n"""  # f\n'
        "v = 1  # g # h\n"
        "# a whole line\n"
    )
    out, _ = shipped_text(source, "p")
    assert out.split("\n") == [
        'x = "a # b"',
        "y = f\"{x}#{x!r}\" + f'{x:#x}'",
        'z = b"#"',
        'w = """',
        "# inside",
        '"""',
        "v = 1",
        "",
        "",
    ]


def _docstrings_emptied(tree: ast.Module) -> str:
    for node in ast.walk(tree):
        owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, owners) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                first.value.value = ""
    for node in ast.walk(tree):  # where each node starts; an emptied docstring ends earlier
        if isinstance(node, ast.expr | ast.stmt):
            node.end_lineno = node.end_col_offset = None
    return ast.dump(tree, include_attributes=True)


def test_every_module_of_firedup_ships_as_the_same_code_on_the_same_lines() -> None:
    """Cutting comments without a tokenizer changes no code: the tree of what ships is the
    tree of the source (docstrings emptied), line for line, for every module, shipped or not."""
    root = Path(__file__).resolve().parents[2] / "firedup"
    sources = sorted(root.rglob("*.py"))
    assert len(sources) > 100
    for path in sources:
        source = path.read_text(encoding="utf-8")
        out, _ = shipped_text(source, "firedup")
        assert out.count("\n") == source.count("\n"), path
        assert _docstrings_emptied(ast.parse(out)) == _docstrings_emptied(ast.parse(source)), path
