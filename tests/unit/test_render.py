"""Rendering: golden file, bash -n, and quoting that keeps every value one word."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from firedup.errors import RenderError
from firedup.inventory import DEFAULT_INVENTORY, load_inventory, parse_inventory
from firedup.render import check_bash_syntax, engine_args, render_launch

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "golden"


def story_script() -> str:
    inv = load_inventory(DEFAULT_INVENTORY)
    host = inv.host("gpu-node")
    return render_launch(
        host, inv.deployment_for(host), run_id="RUN-ID", rundir="/data/firedup/runs/RUN-ID"
    ).text


def test_story_script_matches_golden() -> None:
    assert story_script() == (GOLDEN / "gpu-node.launch.sh").read_text()


def test_rendered_scripts_pass_bash_n_and_shellcheck(tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(story_script())
    subprocess.run(["bash", "-n", str(script)], check=True)
    subprocess.run(["shellcheck", "-s", "bash", str(script)], check=True)


def _inventory(args: dict[str, object], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return parse_inventory(
        {
            "hosts": {
                "n": {"transport": "local", "workdir": "/w", "deployment": "d", "env": env or {}}
            },
            "deployments": {"d": {"engine": "sglang", "model": "/m b", "args": args}},
        },
        Path("x.yaml"),
    )


def test_hostile_values_stay_one_word(tmp_path: Path) -> None:
    evil = "x'; touch /tmp/pwned; echo '"
    inv = _inventory({"served-model-name": evil}, env={"EVIL": evil})
    text = render_launch(inv.host("n"), inv.deployments["d"], run_id="r", rundir=str(tmp_path)).text
    # Run the script with `exec` replaced by printing each argument on its own line.
    probe = text.replace("exec ", "printf '%s\\n' ", 1)
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert evil in lines and "/m b" in lines
    assert not Path("/tmp/pwned").exists()


def test_flag_forms() -> None:
    inv = _inventory(
        {"tp": 8, "trust-remote-code": True, "disable-cuda-graph": False, "ids": [1, 2]}
    )
    assert engine_args(inv.deployments["d"]) == [
        ("--tp", "8"),
        ("--trust-remote-code",),
        ("--ids", "1", "2"),
        ("--log-level", "info"),
    ]


def test_quiet_log_level_is_refused() -> None:
    inv = _inventory({"log-level": "warning"})
    with pytest.raises(RenderError, match="'info' or 'debug'"):
        engine_args(inv.deployments["d"])


def test_invalid_bash_is_caught() -> None:
    from firedup.inventory import Engine
    from firedup.render import LaunchScript

    with pytest.raises(RenderError, match="not valid bash"):
        check_bash_syntax(LaunchScript(text="if then fi\n", engine=Engine.SGLANG))
