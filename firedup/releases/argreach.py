"""Which source files build the engine's server parser, found by following its code.

Stdlib only, Python 3.8 syntax, no firedup imports at run time: preflight ships this file
(after argscan.py, whose names it uses) to the node. Nothing is imported from the engine.

Releases move the parser around (vLLM keeps the API server's flags in
entrypoints/openai/cli_args.py up to 0.28, entrypoints/launchers/cli_args.py in 0.29-0.32,
entrypoints/common/cli_args.py from 0.33), so no list of paths is kept. From the module the
launch runs (ENTRY_MODULES), the reader follows the parser object through the code:
- in the entry module's `if __name__ == "__main__":` block, every call into the package;
- elsewhere, a call that is handed a parser (an argument named `*parser*`, or a fresh
  `*ArgumentParser(...)`) or whose result is bound to a name `*parser*`;
- a call `X.method(parser)` on a class follows the method on the class and its bases
  (`super()`, `cls`, `self` too); imports (module-level, inside functions, relative, and
  names re-exported by a package's __init__) are resolved to files of the package.
A file where the parser is handed to code is a parser file. A parser file's imports of
classes that declare argument fields (annotated `A[T, ...]` fields, `*FrontendArgs`), and of
names used as choices, are read as well: SGLang >= 0.5.20 gathers its fields from
srt/arg_groups/fields/.
"""

from __future__ import annotations

import ast
from typing import Tuple

from firedup.releases.argpkg import FUNCTIONS, Package, defined
from firedup.releases.argscan import Constants, _class_fields, literal_alias, scan_flags

# The modules each engine's launch runs (module path relative to the package).
ENTRY_MODULES = {
    "sglang": ("launch_server.py",),
    "vllm": (
        "entrypoints/openai/api_server.py",
        "entrypoints/launchers/api_server/entry.py",
        "entrypoints/cli/serve.py",
    ),
}
# Read for facts beside the flags (vLLM's speculative methods), not for flags.
FACT_SOURCES = {"sglang": (), "vllm": ("config/speculative.py",)}
Scope = Tuple[str, str]  # (file, qualified name of a def, or "" for a module's body)


def _makes_parser(call: ast.Call) -> bool:
    """`ArgumentParser(...)`, `FlexibleArgumentParser(...)`, `subparsers.add_parser(...)`."""
    name = _callee_name(call)
    return name.endswith("ArgumentParser") or name == "add_parser"


def _parser_names(nodes: list[ast.AST]) -> set[str]:
    """The names that hold the parser in a scope: `parser`, parameters annotated as an
    ArgumentParser, and names bound to a new parser or to a call handed one (in order)."""
    names = {"parser"}
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.arg) and sub.annotation is not None:
                ann = sub.annotation
                text = ann.value if isinstance(ann, ast.Constant) else _dotted_name(ann)
                if str(text).endswith("ArgumentParser"):
                    names.add(sub.arg)
            elif isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call):
                if not (_makes_parser(sub.value) or _hands(sub.value, names)):
                    continue
                names.update(t.id for t in sub.targets if isinstance(t, ast.Name))
    return names


def _dotted_name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return _dotted_name(node.value) + "." + node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _takes_parser(fn: ast.AST) -> bool:
    args = getattr(fn, "args", None)
    if args is None:
        return False
    return bool(_parser_names([args]) - {"parser"}) or any(a.arg == "parser" for a in args.args)


def _hands(call: ast.Call, names: set[str]) -> bool:
    """The call is handed the parser (by name, or a parser made on the spot)."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Name) and arg.id in names:
            return True
        if isinstance(arg, ast.Call) and _makes_parser(arg):
            return True
    return False


def _callee_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_main_block(stmt: ast.stmt) -> bool:
    test = getattr(stmt, "test", None)
    return (
        isinstance(stmt, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def _bound_to_parser(nodes: list[ast.stmt], names: set[str]) -> set[int]:
    """The calls whose result is assigned to a name that holds the parser."""
    out: set[int] = set()
    for node in nodes:
        for stmt in ast.walk(node):
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
                continue
            if any(isinstance(t, ast.Name) and t.id in names for t in stmt.targets):
                out.add(id(stmt.value))
    return out


class Reach:
    """Follows the parser from the entry modules; `files` are the parser files, in order."""

    def __init__(self, pkg: Package) -> None:
        self.pkg = pkg
        self.seen: set[Scope] = set()
        self.files: list[str] = []
        self.tables: dict[str, dict[str, str]] = {}

    def table(self, rel: str) -> dict[str, str]:
        if rel not in self.tables:
            tree = self.pkg.tree(rel)
            self.tables[rel] = self.pkg.imports(rel, list(tree.body)) if tree else {}
        return self.tables[rel]

    def entry(self, rel: str) -> None:
        tree = self.pkg.tree(rel)
        if tree is None:
            return
        for stmt in tree.body:
            if _is_main_block(stmt):
                self.scan(rel, list(getattr(stmt, "body", [])), None, every_call=True)
            elif isinstance(stmt, ast.ClassDef):
                for item in stmt.body:
                    self.scan(rel, [item], stmt, every_call=False)
            else:
                self.scan(rel, [stmt], None, every_call=False)

    def scan(
        self,
        rel: str,
        nodes: list[ast.stmt],
        cls: ast.ClassDef | None,
        every_call: bool,
        params: list[ast.AST] | None = None,
    ) -> None:
        params = params or []
        names = _parser_names(list(nodes) + params)
        bound = _bound_to_parser(nodes, names)
        for node in nodes:
            for call in ast.walk(node):
                if not isinstance(call, ast.Call) or _makes_parser(call):
                    continue
                handed = _hands(call, names)
                if handed or id(call) in bound or every_call:
                    self.follow_call(rel, call, cls, handed or id(call) in bound)
                self.callbacks(rel, call)

    def callbacks(self, rel: str, call: ast.Call) -> None:
        """A function that takes a parser, handed along to be called with one."""
        for arg in call.args:
            if not isinstance(arg, ast.Name) or arg.id in ("self", "cls"):
                continue
            tree = self.pkg.tree(rel)
            local = any(getattr(s, "name", None) == arg.id for s in tree.body) if tree else False
            if not (local or arg.id in self.table(rel)):
                continue
            where, node = self.lookup(rel, arg.id)
            if where and isinstance(node, FUNCTIONS) and _takes_parser(node):
                self.follow_def(where, node, None, True)

    def lookup(self, rel: str, name: str) -> tuple[str | None, ast.AST | None]:
        found = defined(self.pkg.tree(rel), name)
        if found is not None:
            return rel, found
        target = self.table(rel).get(name)
        return self.pkg.resolve(target) if target else (None, None)

    def follow_call(self, rel: str, call: ast.Call, cls: ast.ClassDef | None, handed: bool) -> None:
        func = call.func
        if isinstance(func, ast.Name):
            where, node = self.lookup(rel, func.id)
            if where and isinstance(node, ast.ClassDef):
                self.follow_class(where, node, "__init__", handed)
            elif where and node is not None:
                self.follow_def(where, node, None, handed)
            return
        if not isinstance(func, ast.Attribute):
            return
        owner = func.value
        if isinstance(owner, ast.Call) and _callee_name(owner) == "super" and cls is not None:
            for base_rel, base in self.bases(rel, cls):
                self.follow_class(base_rel, base, func.attr, handed)
        elif isinstance(owner, ast.Name) and owner.id in ("self", "cls") and cls is not None:
            self.follow_class(rel, cls, func.attr, handed)
        elif isinstance(owner, ast.Name):
            where, node = self.lookup(rel, owner.id)
            if where and isinstance(node, ast.ClassDef):
                self.follow_class(where, node, func.attr, handed)
            elif where and node is None:  # a module: `module.function(parser)`
                got, fn = self.pkg.resolve(self.pkg.dotted(where) + ":" + func.attr)
                if got and fn is not None and not isinstance(fn, ast.ClassDef):
                    self.follow_def(got, fn, None, handed)

    def bases(self, rel: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        out = []
        for base in cls.bases:
            if isinstance(base, ast.Name):
                where, node = self.lookup(rel, base.id)
                if where and isinstance(node, ast.ClassDef):
                    out.append((where, node))
        return out

    def follow_class(self, rel: str, cls: ast.ClassDef, method: str, handed: bool) -> None:
        key = (rel, cls.name + "." + method)
        if key in self.seen:
            return
        self.seen.add(key)
        self.mark(rel, handed)
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == method:
                self.follow_def(rel, item, cls, handed)
        for base_rel, base in self.bases(rel, cls):
            self.follow_class(base_rel, base, method, handed)

    def follow_def(self, rel: str, fn: ast.AST, cls: ast.ClassDef | None, handed: bool) -> None:
        key = (rel, (cls.name + "." if cls else "") + getattr(fn, "name", ""))
        if key in self.seen and not cls:
            return
        self.seen.add(key)
        self.mark(rel, handed)
        args = getattr(fn, "args", None)
        params = [args] if args is not None else []
        self.scan(rel, list(getattr(fn, "body", [])), cls, every_call=False, params=params)

    def mark(self, rel: str, handed: bool) -> None:
        if handed and rel not in self.files:
            self.files.append(rel)


def _declares_fields(cls: ast.ClassDef) -> bool:
    """A class whose annotated fields are flags (argscan reads them)."""
    flags: dict[str, list[str] | None] = {}
    _class_fields(cls, Constants(), flags)
    return bool(flags)


def _constant(tree: ast.Module | None, name: str) -> ast.AST | None:
    """The value of a module-level `name = ...`, if the module has one."""
    for stmt in tree.body if tree else []:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
        named = any(isinstance(t, ast.Name) and t.id == name for t in targets)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and named:
            return stmt.value
    return None


def imported_sources(reach: Reach) -> tuple[list[str], list[str]]:
    """(field files, constant files) the parser files import: argument-field classes (also
    listed in an imported constant, `SOURCES = [ModelArgs, ...]`), and module-level
    constants (choices lists, Literal aliases)."""
    pkg = reach.pkg
    fields: list[str] = []
    consts: list[str] = []

    def field_class(where: str | None, node: ast.AST | None) -> None:
        known = where in reach.files or where in fields
        if where and not known and isinstance(node, ast.ClassDef) and _declares_fields(node):
            fields.append(where)

    for rel in list(reach.files):
        for target in reach.table(rel).values():
            module, _, name = target.partition(":")
            where, node = pkg.resolve(target) if name else (None, None)
            field_class(where, node)
            home = pkg.file_of(module) if where and node is None else None
            value = _constant(pkg.tree(home), name) if home else None
            if home and value is not None:
                consts.append(home) if home not in consts else None
                for item in getattr(value, "elts", []):
                    if isinstance(item, ast.Name):
                        field_class(*reach.lookup(home, item.id))
    return fields, consts


def parser_sources(dirs: list[str], engine: str) -> tuple[Package, list[str], list[str]]:
    """The package read, the files that build the engine's server parser (flags), and the
    files read for constants only."""
    pkg = Package(list(dirs), engine)
    reach = Reach(pkg)
    for rel in ENTRY_MODULES[engine]:
        if pkg.file_of(pkg.dotted(rel)):
            reach.entry(rel)
    fields, consts = imported_sources(reach)
    facts = [rel for rel in FACT_SOURCES[engine] if pkg.tree(rel) is not None]
    return pkg, reach.files + fields, consts + facts


def node_flags(package_dirs: list[str], engine: str) -> dict[str, object]:
    """What preflight ships back from the node: the files read and the flags found."""
    pkg, parser, constants = parser_sources(package_dirs, engine)
    texts = [pkg.texts[rel] for rel in parser if rel in pkg.texts]
    extra = [pkg.texts[rel] for rel in constants if rel in pkg.texts]
    return {
        "files": parser,
        "flags": scan_flags(texts, extra),
        "speculative_methods": literal_alias(texts + extra, "SpeculativeMethod"),
    }
