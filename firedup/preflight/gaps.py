"""Known gaps between a model architecture, an algorithm and an engine version (data).

A gap is a launch that crashes on a given engine version until a patch is applied. Add a row
when one is seen in the field, with the patch that closes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from firedup.engine import Engine


@dataclass(frozen=True)
class ModelHookGap:
    architecture: str
    algorithm: str
    engine: Engine
    versions: SpecifierSet
    patch: str
    missing: str
    fixed_in: str

    def applies(self, architectures: tuple[str, ...], algorithm: str | None, version: str) -> bool:
        if self.architecture not in architectures or algorithm != self.algorithm:
            return False
        try:
            return Version(version) in self.versions
        except InvalidVersion:
            return False


GAPS = (
    ModelHookGap(
        architecture="KimiK25ForConditionalGeneration",
        algorithm="EAGLE3",
        engine=Engine.SGLANG,
        versions=SpecifierSet(">=0.5.9,<0.5.10"),
        patch="kimi-k25-eagle3-hooks",
        missing="get_embed_and_head, set_embed_and_head, set_eagle3_layers_to_capture",
        fixed_in="0.5.10",
    ),
)
