"""Rendering a run in a container: the runtime's `run` around the engine's own script."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from firedup.config.inventory import parse_inventory
from firedup.errors import InventoryError
from firedup.launch.render import LaunchScript, check_bash_syntax, render_launch


def _render(
    host: dict[str, Any] | None = None, chosen: tuple[int, ...] | None = None, **deployment: Any
) -> LaunchScript:
    inv = parse_inventory(
        {
            "hosts": {
                "n": {
                    "transport": "local",
                    "workdir": "/w",
                    "deployment": "d",
                    "env": {"PATH": "/node/bin", "NODE_ONLY": "1"},
                    **(host or {}),
                }
            },
            "deployments": {
                "d": {"engine": "sglang", "model": "/models/k", "port": 30000, **deployment}
            },
        },
        Path("x.yaml"),
    )
    spec = inv.host("n")
    deployment_ = inv.deployment_for(spec)
    return render_launch(spec, deployment_, run_id="R1", rundir="/w/runs/R1", gpus=chosen)


def _argv(script: LaunchScript) -> list[str]:
    return shlex.split(script.text.split("\nexec ", 1)[1])


def test_podman_run_asks_for_gpus_by_cdi_and_mounts_what_the_run_needs() -> None:
    script = _render(runtime="podman", image="lmsysorg/sglang:v0.5.9", env={"A": "b"})
    argv = _argv(script)
    assert argv[:6] == ["podman", "run", "-d", "--rm", "--name", "firedup-R1"]
    assert argv[argv.index("--device") :][:2] == ["--device", "nvidia.com/gpu=all"]
    assert argv[argv.index("--network") :][:2] == ["--network", "host"]
    assert argv[argv.index("--shm-size") :][:2] == ["--shm-size", "16g"]
    assert "/w:/w" in argv and "/models/k:/models/k:ro" in argv
    image = argv.index("lmsysorg/sglang:v0.5.9")
    assert argv[image - 2 : image] == ["--entrypoint", "bash"]
    assert argv[-2:] == ["firedup-init", "/w/runs/R1"]
    check_bash_syntax(script)
    # Inside: today's script with the image's python and the deployment's env, not the node's.
    assert "exec python3 -m sglang.launch_server" in script.inner
    assert "export A=b" in script.inner and "NODE_ONLY" not in script.inner
    assert "/node/bin" not in script.inner + script.text


def test_docker_asks_for_gpus_with_its_flag_and_none_asks_for_nothing() -> None:
    docker = _argv(_render(runtime="docker", image="vllm/vllm-openai:v0.11.1"))
    assert docker[0] == "docker" and docker[docker.index("--gpus") + 1] == "all"
    cpu = _argv(_render({"container": {"gpus": "none"}}, runtime="podman", image="i"))
    assert "--device" not in cpu and "--gpus" not in cpu


def test_env_and_secrets_stay_off_the_runtime_command_line() -> None:
    script = _render(
        {
            "runtime": "podman",
            "image": "i",
            "container": {"runtime_env": {"CONTAINERS_CONF": "/c"}},
        },
        env={"TOKENISH": "value-1"},
        secrets=["HF_TOKEN"],
    )
    assert _argv(script)[:2] == ["env", "CONTAINERS_CONF=/c"]
    assert "value-1" not in script.text and "HF_TOKEN" not in script.text
    assert "-e" not in _argv(script) and "--env-file" not in _argv(script)
    assert ". ./secrets.env" in script.inner and "rm -f -- ./secrets.env" in script.inner


def test_the_deployment_runtime_wins_and_a_container_needs_an_image() -> None:
    assert _render({"runtime": "podman", "image": "i"}, runtime="python").inner == ""
    with pytest.raises(InventoryError, match="runtime podman needs an image"):
        _render(runtime="podman")


def test_the_outer_script_passes_shellcheck(tmp_path: Path) -> None:
    path = tmp_path / "launch.sh"
    path.write_text(_render(runtime="podman", image="i").text)
    subprocess.run(["shellcheck", "-s", "bash", str(path)], check=True)


def _devices(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_a_gpu_selection_gives_the_container_exactly_those_gpus_seen_from_0_inside() -> None:
    """podman: one CDI device per chosen GPU; docker: one quoted device list. Inside, the
    runtime exposes only those, renumbered from 0: CUDA_VISIBLE_DEVICES names 0..n-1 there."""
    listed = _render(runtime="podman", image="i", tp=2, gpus=[4, 6])
    assert _devices(_argv(listed), "--device") == ["nvidia.com/gpu=4", "nvidia.com/gpu=6"]
    assert "export CUDA_VISIBLE_DEVICES=0,1" in listed.inner
    assert "4" not in listed.inner.split("CUDA_VISIBLE_DEVICES=")[1].split("\n")[0]
    docker = _render(runtime="docker", image="i", tp=2, gpus=[4, 6])
    assert _devices(_argv(docker), "--gpus") == ['"device=4,6"']
    assert "export CUDA_VISIBLE_DEVICES=0,1" in docker.inner
    # `gpus: auto`, chosen on the node at deploy (3 and 5): the same.
    auto = _render(runtime="podman", image="i", chosen=(3, 5), tp=2, gpus="auto")
    assert _devices(_argv(auto), "--device") == ["nvidia.com/gpu=3", "nvidia.com/gpu=5"]
    assert "export CUDA_VISIBLE_DEVICES=0,1" in auto.inner
    # A selection said as CUDA_VISIBLE_DEVICES in the deployment's env is one too.
    env = _render(runtime="podman", image="i", env={"CUDA_VISIBLE_DEVICES": "2"})
    assert _devices(_argv(env), "--device") == ["nvidia.com/gpu=2"]
    assert "export CUDA_VISIBLE_DEVICES=0" in env.inner and "=2" not in env.inner
    # No selection: every GPU, and the engine's env says nothing of them.
    every = _render(runtime="podman", image="i")
    assert _devices(_argv(every), "--device") == ["nvidia.com/gpu=all"]
    assert "CUDA_VISIBLE_DEVICES" not in every.inner


def test_a_cpu_node_gets_no_gpu_device_whatever_the_selection() -> None:
    for runtime in ("podman", "docker"):
        cpu = _render({"container": {"gpus": "none"}}, runtime=runtime, image="i", tp=1, gpus=[1])
        argv = _argv(cpu)
        assert "--device" not in argv and "--gpus" not in argv


def test_the_cdi_kind_names_the_devices_and_a_malformed_one_is_refused_at_load() -> None:
    host = {"container": {"cdi_kind": "amd.com/gpu"}}
    argv = _argv(_render(host, runtime="podman", image="i", tp=1, gpus=[2]))
    assert _devices(argv, "--device") == ["amd.com/gpu=2"]
    with pytest.raises(InventoryError, match="cdi_kind"):
        _render({"container": {"cdi_kind": "gpu"}}, runtime="podman", image="i")
