"""Preflight of a run in a container: the node's facts from the node, the engine's from the image.

Ports, GPUs, processes and the disk are the node's (its python looks, as always); the engine's
release and its flags are the image's: the same facts snippet (argscan included) runs in a
throwaway container of the image (`run --rm`, nothing installed). A missing image is a failed
check that names the pull.
"""

from __future__ import annotations

from dataclasses import replace

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.launch.container import model_mounts
from firedup.node.base import Node
from firedup.node.runtime import OciRuntime
from firedup.preflight.facts import NodeFacts, facts_tail, gather_facts
from firedup.preflight.model import Check, failed, passed


def image_check(node: Node, runtime: OciRuntime) -> Check:
    found = node.run(runtime.image_id_argv(), check=False, what="image inspect")
    if found.ok:
        return passed("image", f"{runtime.image} ({found.out.strip()[:19]}) on {runtime.name}")
    return failed(
        "image",
        f"{runtime.image} is not on the node ({runtime.name}: {found.err.strip()[-200:]})",
        hint=f"pull it on the node: `{runtime.name} pull {runtime.image}`",
    )


def container_facts(
    node: Node, host: HostSpec, deployment: Deployment, runtime: OciRuntime
) -> tuple[NodeFacts, Check]:
    """The node's facts with the engine's replaced by the image's; and the image check."""
    facts = gather_facts(node, host, deployment)
    check = image_check(node, runtime)
    if check.outcome.value == "fail":
        return replace(
            facts,
            engine_importable=False,
            engine_version=None,
            engine_path=None,
            engine_error=check.detail,
            engine_args=None,
        ), check
    argv = [*runtime.python_argv(deployment.env, model_mounts(deployment))]
    inside = gather_facts(node, host, deployment, [*argv, *facts_tail(host, deployment)])
    return replace(
        facts,
        engine_importable=inside.engine_importable,
        engine_version=inside.engine_version,
        engine_path=inside.engine_path,
        engine_error=inside.engine_error,
        engine_args=inside.engine_args,
    ), check
