"""Read an engine release's command-line flags from its source, without importing it.

One pure module, shared by the conformance tool (reading wheels on the operator's machine) and
by preflight (shipped to the node and run by the node's own python, so: stdlib only, Python
3.8 syntax, no firedup imports). Importing an engine's server args would import torch.

Both engines declare flags in two schemes, and both are read:
- `parser.add_argument("--flag", "--alias", choices=[...])` calls (SGLang <= 0.5.13 and the
  rest of its parser later; vLLM's engine/arg_utils.py and cli_args.py);
- annotated fields turned into flags by a helper: SGLang >= 0.5.14 writes
  `name: A[T, "help"] = default` or `A[T, Arg(aliases=[...], choices=[...])]` (field
  `cuda_graph_max_bs_decode` is flag `--cuda-graph-max-bs-decode`; `Literal[...]` types are
  choices; BooleanOptionalAction adds `--no-...`); vLLM's `*FrontendArgs` classes turn every
  annotated field into `--kebab-case`.
Choices given by a name are resolved against module-level lists and `Literal[...]` aliases
of all the sources read; a computed choice list (`list(X.keys())`) reads as "not known".
"""

from __future__ import annotations  # first statement of the snippet preflight ships

import ast
from collections.abc import Iterable
from typing import Dict, List, Optional

ANNOTATED = ("A", "Annotated")
FIELD_CLASS_SUFFIX = "FrontendArgs"  # vLLM: every annotated field is a flag

Flags = Dict[str, Optional[List[str]]]  # flag -> its choices (None: free, or not readable)


def _elts(node: ast.AST) -> list[ast.AST]:
    index = getattr(ast, "Index", None)  # Python 3.8 wraps subscripts in ast.Index
    if index is not None and isinstance(node, index):
        node = getattr(node, "value")  # noqa: B009 (3.8's ast.Index has no stub here)
    if isinstance(node, ast.Tuple):
        return list(node.elts)
    return [node]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


class Constants:
    """Module-level string lists and Literal aliases, by name, across the sources read."""

    def __init__(self) -> None:
        self.values: dict[str, ast.AST] = {}

    def collect(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, value = stmt.target, stmt.value
            else:
                continue
            if isinstance(target, ast.Name):
                self.values[target.id] = value

    def strings(self, node: ast.AST | None, depth: int = 0) -> list[str] | None:
        """The literal strings a choices expression stands for, or None if computed."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Name) and node.id in self.values:
            return self.strings(self.values[node.id], depth + 1)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
            return [str(node.value)]
        if isinstance(node, ast.Subscript) and _name(node.value) == "Literal":
            return self._join(_elts(node.slice), depth)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._join(node.elts, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._join([node.left, node.right], depth)
        return None

    def _join(self, nodes: Iterable[ast.AST], depth: int) -> list[str] | None:
        out: list[str] = []
        for item in nodes:
            got = self.strings(item, depth + 1)
            if got is None:
                return None
            out.extend(got)
        return out


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _add_argument(call: ast.Call, consts: Constants, flags: Flags) -> None:
    names = [
        a.value
        for a in call.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
    ]
    choices = consts.strings(_keyword(call, "choices"))
    boolean_optional = _name(_keyword(call, "action") or ast.Name(id="")) == (
        "BooleanOptionalAction"
    )
    for flag in names:
        flags[flag] = choices
        if boolean_optional and flag.startswith("--"):
            flags["--no-" + flag[2:]] = None


def _optional_inner(node: ast.AST) -> ast.AST:
    """Optional[T] -> T; `T | None` -> T."""
    if isinstance(node, ast.Subscript) and _name(node.value) == "Optional":
        return _elts(node.slice)[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return side
    return node


def _annotated_field(name: str, annotation: ast.AST, consts: Constants, flags: Flags) -> None:
    """`name: A[T, "help" | Arg(...)]`: a flag unless Arg(no_cli=True)."""
    parts = _elts(annotation.slice) if isinstance(annotation, ast.Subscript) else []
    if len(parts) < 2:
        return
    meta: Optional[ast.expr] = None
    for part in parts[1:]:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            meta = meta or part
        elif isinstance(part, ast.Call) and _name(part.func) == "Arg":
            meta = part
    if meta is None:
        return
    flag, aliases, choices, action = "--" + name.replace("_", "-"), [], None, ""
    if isinstance(meta, ast.Call):
        no_cli = _keyword(meta, "no_cli")
        if isinstance(no_cli, ast.Constant) and no_cli.value is True:
            return
        cli_name = _keyword(meta, "cli_name")
        if isinstance(cli_name, ast.Constant) and isinstance(cli_name.value, str):
            flag = cli_name.value
        aliases = consts.strings(_keyword(meta, "aliases")) or []
        choices = consts.strings(_keyword(meta, "choices"))
        action = _name(_keyword(meta, "action") or ast.Name(id=""))
    if choices is None:
        inner = _optional_inner(parts[0])
        if isinstance(inner, ast.Subscript) and _name(inner.value) == "Literal":
            choices = consts.strings(inner)
    for each in [flag, *aliases]:
        flags[each] = choices
    if action == "BooleanOptionalAction":
        flags["--no-" + flag[2:]] = None


def _class_fields(cls: ast.ClassDef, consts: Constants, flags: Flags) -> None:
    plain = cls.name.endswith(FIELD_CLASS_SUFFIX)
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        name, annotation = stmt.target.id, stmt.annotation
        if name.startswith("_") or _name(annotation) == "ClassVar":
            continue
        if isinstance(annotation, ast.Subscript) and _name(annotation.value) in ANNOTATED:
            _annotated_field(name, annotation, consts, flags)
        elif plain:
            flags["--" + name.replace("_", "-")] = None


def scan_flags(texts: Iterable[str], constant_texts: Iterable[str] = ()) -> Flags:
    """Every flag the sources declare, with its choices when they are literal (resolved
    against the constants of the sources and of `constant_texts`)."""
    trees: list[ast.Module] = []
    consts = Constants()
    for text in constant_texts:
        try:
            consts.collect(ast.parse(text))
        except SyntaxError:
            continue
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        consts.collect(tree)
        trees.append(tree)
    flags: Flags = {}
    for tree in trees:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
            ):
                _add_argument(node, consts, flags)
            elif isinstance(node, ast.ClassDef):
                _class_fields(node, consts, flags)
    return flags


def literal_alias(texts: Iterable[str], name: str) -> list[str] | None:
    """The values of a module-level `Name = Literal[...]` alias (vLLM's SpeculativeMethod)."""
    consts = Constants()
    for text in texts:
        try:
            consts.collect(ast.parse(text))
        except SyntaxError:
            continue
    if name not in consts.values:
        return None
    return consts.strings(consts.values[name])
