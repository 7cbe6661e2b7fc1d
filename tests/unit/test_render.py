"""Rendering: golden file, bash -n, and quoting that keeps every value one word."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from firedup.config.inventory import load_inventory, parse_inventory
from firedup.errors import RenderError
from firedup.launch.render import check_bash_syntax, engine_args, render_launch

# The demo inventory shipped in this checkout.
DEMO_INVENTORY = Path(__file__).resolve().parents[2] / "inventory" / "hosts.yaml"

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "golden"


def story_script() -> str:
    inv = load_inventory(DEMO_INVENTORY)
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
        {
            "enable-metrics": True,
            "disable-cuda-graph": False,
            "ids": [1, 2],
            "chunked-prefill-size": 8192,
        }
    )
    assert engine_args(inv.deployments["d"]) == [
        ("--enable-metrics",),
        ("--ids", "1", "2"),
        ("--chunked-prefill-size", "8192"),
        ("--log-level", "info"),
    ]


def test_a_flag_with_a_deployment_key_is_refused() -> None:
    from firedup.errors import InventoryError

    with pytest.raises(InventoryError, match=re.escape("args.tp: set it with the deployment key")):
        _inventory({"tp": 8})


def test_quiet_log_level_is_refused() -> None:
    inv = _inventory({"log-level": "warning"})
    with pytest.raises(RenderError, match="'info' or 'debug'"):
        engine_args(inv.deployments["d"])


def test_invalid_bash_is_caught() -> None:
    from firedup.engine import Engine
    from firedup.launch.render import LaunchScript

    with pytest.raises(RenderError, match="not valid bash"):
        check_bash_syntax(LaunchScript(text="if then fi\n", engine=Engine.SGLANG))


def _render(deployment: dict[str, object]) -> str:
    inv = parse_inventory(
        {
            "hosts": {"n": {"transport": "local", "workdir": "/w", "deployment": "d"}},
            "deployments": {"d": deployment},
        },
        Path("x.yaml"),
    )
    host = inv.host("n")
    return render_launch(host, inv.deployment_for(host), run_id="R", rundir="/w/runs/R").text


def test_vllm_script_matches_golden(tmp_path: Path) -> None:
    text = _render(
        {
            "engine": "vllm",
            "model": "/data/models/Kimi-K2.5",
            "port": 8000,
            "bind": "0.0.0.0",
            "tp": 8,
            "context_length": 131072,
            "mem_fraction": 0.9,
            "trust_remote_code": True,
            "speculative": {
                "algorithm": "EAGLE3",
                "draft_model": "/data/models/Kimi-K25-eagle3",
                "num_steps": 3,
                "draft_tp": 8,
            },
            "args": {"served-model-name": "kimi"},
        }
    )
    assert text == (GOLDEN / "vllm-eagle3.launch.sh").read_text()
    script = tmp_path / "launch.sh"
    script.write_text(text)
    subprocess.run(["shellcheck", "-s", "bash", str(script)], check=True)


def test_secrets_are_sourced_not_written_and_extend_exports_the_variable() -> None:
    text = _render(
        {
            "engine": "sglang",
            "model": "/m",
            "draft_context": "extend",
            "speculative": {"algorithm": "EAGLE3", "draft_model": "/d"},
            "secrets": ["HF_TOKEN"],
        }
    )
    assert "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in text
    assert ". ./secrets.env" in text and "HF_TOKEN" in text
    assert "--speculative-draft-model-path /d" in text
    vllm = _render({"engine": "vllm", "model": "/m", "draft_context": "extend"})
    assert "SGLANG_ALLOW" not in vllm


def test_long_context_exports_each_engines_own_variable() -> None:
    sglang = _render({"engine": "sglang", "model": "/m", "long_context": "allow"})
    assert "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in sglang
    assert "VLLM_ALLOW" not in sglang
    for knob in ({"long_context": "allow"}, {"draft_context": "extend"}):  # the old spelling too
        vllm = _render({"engine": "vllm", "model": "/m", **knob})
        assert "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in vllm and "SGLANG_ALLOW" not in vllm
    assert "ALLOW" not in _render({"engine": "vllm", "model": "/m"})
