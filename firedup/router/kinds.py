"""Which class speaks to which kind of router: the one table a new kind is added to."""

from __future__ import annotations

from collections.abc import Callable

from firedup.config.router import RouterKind, RouterSpec
from firedup.node.base import Node
from firedup.router.base import Router
from firedup.router.sglang import SglangRouter

KINDS: dict[RouterKind, Callable[[Node, str, RouterSpec], Router]] = {
    RouterKind.SGLANG: SglangRouter,
}


def router_for(node: Node, python: str, spec: RouterSpec) -> Router:
    """The router `spec` names, spoken to from `node` with its `python`."""
    return KINDS[spec.kind](node, python, spec)
