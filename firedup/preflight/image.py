"""Preflight of a run in a container: the node's facts from the node, the engine's from the image.

Ports, GPUs, processes and the disk are the node's (its python looks, as always); the engine's
release and its flags are the image's: the same facts snippet (argscan included) runs in a
throwaway container of the image (`run --rm`, nothing installed). A missing image is a failed
check that names the pull.
"""

from __future__ import annotations

import re
from dataclasses import replace

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.launch.container import model_mounts
from firedup.node.base import Node
from firedup.node.runtime import OciRuntime
from firedup.preflight.facts import NodeFacts, facts_tail, gather_facts
from firedup.preflight.model import Check, failed, passed

# What podman ("image not known") and docker ("No such image") say of an image they lack.
MISSING = re.compile(r"image not known|no such image|not found", re.IGNORECASE)


def image_check(node: Node, runtime: OciRuntime) -> Check:
    found = node.run(runtime.image_id_argv(), check=False, what="image inspect")
    said = (found.err or found.out).strip()
    if found.ok:
        return passed("image", f"{runtime.image} ({found.out.strip()[:19]}) on {runtime.name}")
    if found.exit_code == 127:  # `env` (or the shell) found no such command
        return failed(
            "image",
            f"{runtime.name} is not installed on the node (not on the login shell's PATH)",
            hint=f"install {runtime.name} on the node, or set the runtime the node has "
            "(docs/containers.md: what each runtime needs)",
        )
    if not MISSING.search(said):  # the runtime itself cannot answer (a daemon down, storage)
        return failed(
            "image",
            f"{runtime.name} cannot say whether {runtime.image} is on the node: {said[-200:]}",
            hint=f"check {runtime.name} on the node (docs/containers.md: what each runtime needs)",
        )
    return failed(
        "image",
        f"{runtime.image} is not on the node ({runtime.name}: {said[-200:]})",
        hint=f"pull it on the node: `{runtime.name} pull {runtime.image}` (or `fab pull`)",
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
