"""Argparse flags from annotated fields, as sglang >= 0.5.20 derives them (simulated).

`name: A[T, "help"] = default` is flag `--name-with-dashes`; `A[T, Arg(...)]` adds aliases,
choices, an action, or `no_cli=True` to keep a field off the command line; a `Literal[...]`
type gives the choices. The same scheme the real `arg_groups/arg_utils.py` implements.
"""

from __future__ import annotations

import argparse
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

A = Annotated


@dataclass(frozen=True)
class Arg:
    help: str = ""
    choices: list[Any] | None = None
    aliases: list[str] | None = None
    action: Any = None
    no_cli: bool = False


def _unwrap(tp: Any) -> tuple[Any, Arg | None]:
    if get_origin(tp) is Annotated:
        inner, *meta = get_args(tp)
        for item in meta:
            if isinstance(item, Arg):
                return inner, item
            if isinstance(item, str):
                return inner, Arg(help=item)
        return inner, None
    return tp, None


def _optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, getattr(__import__("types"), "UnionType", Union)):
        rest = [a for a in get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return tp


def add_cli_args_from_dataclass(parser: argparse.ArgumentParser, cls: type) -> None:
    hints = typing.get_type_hints(cls, include_extras=True)
    for name, hint in hints.items():
        if name.startswith("_"):
            continue
        raw, arg = _unwrap(hint)
        if arg is None or arg.no_cli:
            continue
        inner = _optional(raw)
        kwargs: dict[str, Any] = {"dest": name, "default": getattr(cls, name, None)}
        choices = arg.choices
        if choices is None and get_origin(inner) is Literal:
            choices = list(get_args(inner))
        if arg.action is not None:
            kwargs["action"] = arg.action
        elif inner is bool:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = inner if inner in (int, float, str) else str
            if choices is not None:
                kwargs["choices"] = choices
        flags = ["--" + name.replace("_", "-"), *(arg.aliases or [])]
        parser.add_argument(*flags, help=arg.help, **kwargs)
