"""HTTP from the node: run the shipped stdlib snippet, get the answer back as a value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from firedup.errors import RouterError
from firedup.node.base import Node


class NoAnswer(RouterError):
    """No HTTP answer came; `refused` when nothing listens at the address."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class Answer:
    status: int
    body: str

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@cache
def _snippet() -> str:
    return resources.files("firedup.node.sh").joinpath("http_call.py").read_text("utf-8")


def http_argv(python: str, method: str, url: str, timeout_s: float, body: Any = None) -> list[str]:
    argv = [python, "-I", "-c", _snippet(), method, url, f"{timeout_s:g}"]
    return argv if body is None else [*argv, json.dumps(body)]


def parse_answer(stdout: bytes, what: str) -> Answer:
    """The snippet's one JSON line; an error (no answer) raises RouterError naming `what`."""
    try:
        out = json.loads(stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RouterError(f"{what}: no answer from the node's python") from None
    if "error" in out:
        raise NoAnswer(f"{what}: {out['error']}", refused=bool(out.get("refused")))
    return Answer(int(out["status"]), str(out["body"]))


def node_http(
    node: Node, python: str, method: str, url: str, *, timeout_s: float = 10.0, body: Any = None
) -> Answer:
    argv = http_argv(python, method, url, timeout_s, body)
    result = node.run(argv, timeout_s=timeout_s + 20, check=False, what=f"{method} {url}")
    if result.exit_code != 0:
        detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RouterError(
            f"{method} {url}: {python} exited {result.exit_code}: {detail[-1] if detail else ''}"
        )
    return parse_answer(result.stdout, f"{method} {url}")
