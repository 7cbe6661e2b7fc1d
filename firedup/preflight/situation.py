"""What a preflight check may look at: the node's facts, the deployment, the launch script
rendered for the node's engine release, and our current run. Nothing here touches the node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from firedup.config.deployment import Deployment
from firedup.patching import PatchReport
from firedup.preflight.facts import Gpu, NodeFacts


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
    gpus_chosen: tuple[int, ...] | None = None  # node GPU indices (firedup.preflight.gpuchoice)
    gpus_why: str = ""
    gpus_short: str = ""  # `gpus: auto` found too few free GPUs: why
    accelerator: str = "auto"  # the host's `accelerator` key: auto, gpu or cpu
    launch_env: Mapping[str, str] = field(default_factory=dict)  # what the launch exports

    def used_gpus(self, per_node: int) -> tuple[Gpu, ...]:
        """The GPUs the launch will use (after a restart's), in the chosen order; without a
        choice, the first `per_node` (the engine's own default)."""
        gpus = self.gpus_after_restart()
        if self.gpus_chosen is None:
            return gpus[:per_node]
        by_index = {g.index: g for g in gpus}
        return tuple(by_index[i] for i in self.gpus_chosen if i in by_index)

    def gpus_after_restart(self) -> tuple[Gpu, ...]:
        """The GPUs as they will be once a restart has stopped our run: its memory counts as
        free (it is about to be), per GPU by uuid, so a restart is not refused for the memory
        it replaces. Without --restart, or with no run of ours: the GPUs as they are."""
        if not self.restart or self.our_sid is None:
            return self.facts.gpus
        ours = {p.pid for p in self.facts.processes if p.sid == self.our_sid} | {self.our_sid}
        held: dict[str, float] = {}
        for app in self.facts.gpu_apps:
            if app.pid in ours and app.gpu_uuid:
                held[app.gpu_uuid] = held.get(app.gpu_uuid, 0.0) + app.used_mib
        return tuple(
            replace(
                g,
                used_mib=max(0.0, g.used_mib - held.get(g.uuid, 0.0)),
                free_mib=min(g.total_mib, g.free_mib + held.get(g.uuid, 0.0)),
            )
            for g in self.facts.gpus
        )
