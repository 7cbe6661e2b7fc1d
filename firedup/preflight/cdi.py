"""Preflight of podman's GPU devices: the CDI spec on the node names every device asked for.

podman turns `--device nvidia.com/gpu=4` into device nodes and mounts by the node's CDI specs
(`nvidia-ctk cdi generate` writes them to /etc/cdi or /var/run/cdi); a device no spec names
fails the `run` ("unresolvable CDI devices"). Read here first, so a deploy is refused before
anything starts, naming the command that writes the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.config.slots import spell_gpus
from firedup.launch.container import device_gpus
from firedup.node.base import Node, run_script
from firedup.node.runtime import OciRuntime
from firedup.preflight.model import Check, failed, passed

CDI_DIRS = "/etc/cdi, /var/run/cdi"
GENERATE = "`sudo nvidia-ctk cdi generate --output /etc/cdi/nvidia.yaml` (NVIDIA Container Toolkit)"


def parse_specs(raw: bytes) -> dict[str, frozenset[str]]:
    """cdi_specs.sh's output -> kind -> the device names its specs define. A file that does
    not parse, or is not a spec, defines nothing (podman skips it too)."""
    import yaml  # JSON specs are YAML too

    parts = raw.split(b"\0")
    found: dict[str, set[str]] = {}
    for text in parts[1::2]:
        try:
            spec: Any = yaml.safe_load(text.decode("utf-8", "replace"))
        except yaml.YAMLError:
            continue
        if not isinstance(spec, Mapping) or not isinstance(spec.get("kind"), str):
            continue
        devices = spec.get("devices")
        devices = devices if isinstance(devices, list) else []
        names = {str(d["name"]) for d in devices if isinstance(d, Mapping) and "name" in d}
        found.setdefault(spec["kind"], set()).update(names)
    return {kind: frozenset(names) for kind, names in found.items()}


def _names_text(names: frozenset[str]) -> str:
    """Index names in order, then `all`; UUID and MIG names only counted (a node has many)."""
    indices = sorted((n for n in names if n.isdigit()), key=int)
    shown = [*indices, *(["all"] if "all" in names else [])]
    others = len(names) - len(shown)
    return ",".join(shown) + (f" and {others} more by UUID" if others else "")


def read_specs(node: Node) -> dict[str, frozenset[str]]:
    return parse_specs(run_script(node, "cdi_specs", check=False, what="read CDI specs").stdout)


def check_cdi(
    specs: Mapping[str, frozenset[str]], kind: str, gpus: tuple[int, ...] | None
) -> Check:
    """Every device the run asks for (the chosen GPUs, or `all`) is named by a spec (pure)."""
    wanted = ["all"] if gpus is None else [str(g) for g in gpus]
    asked = spell_gpus(gpus) if gpus is not None else "all"
    names = specs.get(kind)
    if not names:
        return failed(
            "cdi devices",
            f"no CDI spec on the node names {kind} devices (looked in {CDI_DIRS}): podman "
            f"would refuse --device {kind}={wanted[0]}",
            hint=f"generate the spec on the node: {GENERATE}; or `container.gpus: none` on a "
            "node without GPUs",
        )
    missing = [w for w in wanted if w not in names]
    if missing:
        have = _names_text(names)
        return failed(
            "cdi devices",
            f"the node's CDI spec has no {kind}={','.join(missing)} (it names {have})",
            hint=f"pick GPUs the spec names, or regenerate it after a GPU change: {GENERATE}",
        )
    return passed("cdi devices", f"{kind}={asked} named by the node's CDI spec")


def device_checks(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    runtime: OciRuntime,
    chosen: tuple[int, ...] | None,
) -> tuple[Check, ...]:
    """The CDI check where the runtime asks for GPUs by CDI and the run gets some: the
    devices the launch will ask for (`chosen`: the GPUs picked on the node for `gpus: auto`)."""
    if not runtime.flavour.reads_cdi or runtime.options.gpus == "none":
        return ()
    picked = chosen if deployment.gpus == "auto" else None  # as the deploy renders it
    devices = device_gpus(runtime, host, deployment, picked)
    return (check_cdi(read_specs(node), runtime.options.cdi_kind, devices),)
