"""Issue 16 §9: every bad input gets one clean line, the documented exit code (see
docs/exit-codes.md), no traceback and no hang. Most need no node: nothing is contacted."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import FAB, REPO, SIM_MODELS, fab

INVENTORY = {
    "hosts": {"n": {"transport": "local", "workdir": "/nonexistent/fd", "deployment": "d"}},
    "deployments": {"d": {"engine": "sglang", "model": str(SIM_MODELS / "tiny-llama")}},
}


def clean_failure(result: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "Traceback" not in output and "Exception" not in output, output
    assert result.stderr.startswith("firedup: "), output
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("  hint: ")]
    assert len(lines) == 1, output  # one line (and maybe a hint)
    for word in words:
        assert word in result.stderr, output


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(INVENTORY))
    return path


def test_explain_log_refuses_what_is_not_a_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        started = time.monotonic()
        result = fab("explain-log", path, timeout_s=30)
        assert time.monotonic() - started < 20
        clean_failure(result, 2, "not a regular file")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("logs", "--lines", "abc"), "--lines"),
        (("stop", "--grace", "abc"), "--grace"),
        (("history", "--lines", "0"), "--lines"),
        (("history", "--lines", "-1"), "--lines"),
        (("deploy", "--poll", "0"), "--poll"),
        (("wait", "--poll", "nan"), "--poll"),
        (("wait", "--timeout", "soon"), "--timeout"),
    ],
)
def test_bad_option_values(args: tuple[str, ...], option: str, inventory: Path) -> None:
    result = fab(*args, "--host", "n", "--inventory", str(inventory), timeout_s=30)
    clean_failure(result, 2, option)


def test_an_inventory_key_that_is_a_list(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text("hosts:\n  [a, b]: {workdir: /x}\ndeployments: {}\n")
    clean_failure(fab("status", "--inventory", str(path)), 2, "key")


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    path = tmp_path / "hosts.yaml"
    path.write_text("\n".join(lines) + "\nhosts: *a8\ndeployments: {}\n")
    assert path.stat().st_size < 1000
    started = time.monotonic()
    result = fab("status", "--inventory", str(path), timeout_s=60)
    assert time.monotonic() - started < 5
    clean_failure(result, 2, "aliases")


def test_the_stock_inventory_still_loads_with_its_anchors() -> None:
    result = fab("render", "--host", "demo")
    assert result.returncode == 0, result.stderr


def test_an_unknown_patch_is_an_inventory_error(tmp_path: Path) -> None:
    data = {**INVENTORY, "deployments": {"d": {**INVENTORY["deployments"]["d"]}}}
    data["deployments"]["d"]["patches"] = ["no-such-patch"]
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump(data))
    for name in ("no-such-patch", "../etc"):
        data["deployments"]["d"]["patches"] = [name]
        path.write_text(yaml.safe_dump(data))
        clean_failure(fab("plan", "--host", "n", "--inventory", str(path)), 2, "patch")


PIPE_INTO_TRUE = '"$1" status --inventory "$2" | true; echo "${PIPESTATUS[0]}"'


def test_status_into_a_closed_pipe(inventory: Path) -> None:
    """`fab status | head -2`: the reader went away (here before the first byte, so the
    write certainly fails); no BrokenPipeError traceback."""
    done = subprocess.run(
        ["bash", "-c", PIPE_INTO_TRUE, "b", FAB, str(inventory)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stdout.split()[-1] in {"0", "141", "3"}, done.stdout


def test_a_value_that_starts_with_a_dash_stays_the_flags(inventory: Path, tmp_path: Path) -> None:
    data = {**INVENTORY, "deployments": {"d": {**INVENTORY["deployments"]["d"]}}}
    data["deployments"]["d"]["args"] = {"chat-template": "-weird name"}
    path = tmp_path / "dash.yaml"
    path.write_text(yaml.safe_dump(data))
    result = fab("render", "--host", "n", "--inventory", str(path))
    assert result.returncode == 0, result.stderr
    assert "'--chat-template=-weird name'" in result.stdout, result.stdout  # one word
