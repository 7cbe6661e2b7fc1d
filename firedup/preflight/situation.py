"""What a preflight check may look at: the node's facts, the deployment, the launch script
rendered for the node's engine release, and our current run. Nothing here touches the node."""

from __future__ import annotations

from dataclasses import dataclass

from firedup.config.deployment import Deployment
from firedup.patching import PatchReport
from firedup.preflight.facts import NodeFacts


@dataclass(frozen=True)
class Situation:
    """Everything a check may look at; nothing here touches the node."""

    facts: NodeFacts
    deployment: Deployment
    patches: PatchReport | None
    our_sid: int | None  # the session of our current run on this node, if any runs
    our_run: str | None
    restart: bool
    script: str | None = None  # the launch script rendered for the node's engine release
    render_error: str | None = None  # why it could not be (a knob the release lacks)
