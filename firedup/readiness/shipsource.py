"""One module's source as the node reader's bundle ships it (pure): its docstrings emptied and
its comments cut, every line kept in place (a traceback from the node points at the right
line), and the names it imports (the bundle follows them).

One parse and one walk of the tree give all three: the docstrings, the string literals (a `#`
inside one is text, anywhere else it starts a comment) and the imports. No tokenizer runs:
tokenize, pure Python, took most of the bundle's 0.1 s, which every `fab` command that reads
the node paid before its first round trip.
"""

from __future__ import annotations

import ast

_DOC_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_TO_END = 1 << 30  # a span that runs to the end of its line

Span = tuple[int, int, int, int]  # first line, its byte column, last line, its byte column


def shipped_text(source: str, package: str) -> tuple[str, set[str]]:
    """(the text that ships, what `source` imports); `package`: where relative imports start."""
    docs: list[Span] = []
    strings: dict[int, list[tuple[int, int]]] = {}  # line index -> byte spans of literals on it
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant | ast.JoinedStr):
            _cover(strings, node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= _imported(node, package)
        if isinstance(node, _DOC_OWNERS) and node.body and _is_docstring(node.body[0]):
            first = node.body[0]
            assert first.end_lineno is not None and first.end_col_offset is not None
            docs.append(
                (first.lineno - 1, first.col_offset, first.end_lineno - 1, first.end_col_offset)
            )
    lines = source.split("\n")
    for i, line in enumerate(lines):
        if "#" in line:
            lines[i] = _cut_comment(line, strings.get(i, []))
    # Comments first: a comment after a docstring's closing quotes leaves its columns in place.
    for start, col, end, end_col in sorted(docs, reverse=True):
        head = lines[start].encode("utf-8")[:col].decode("utf-8")
        tail = lines[end].encode("utf-8")[end_col:].decode("utf-8")
        lines[start : end + 1] = (head + '"""' + "\n" * (end - start) + '"""' + tail).split("\n")
    return "\n".join(line.rstrip() for line in lines), names


def imports(source: str, package: str) -> set[str]:
    """Absolute names of what `source` imports, including `module.name` candidates for
    `from module import name`."""
    return shipped_text(source, package)[1]


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
        and statement.end_lineno is not None
        and statement.end_col_offset is not None
    )


def _cover(strings: dict[int, list[tuple[int, int]]], node: ast.expr) -> None:
    """Mark the literal's bytes on each of its lines (ast's columns count UTF-8 bytes)."""
    last = node.end_lineno if node.end_lineno is not None else node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else _TO_END
    for line in range(node.lineno, last + 1):
        start = node.col_offset if line == node.lineno else 0
        stop = end_col if line == last else _TO_END
        strings.setdefault(line - 1, []).append((start, stop))


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = package.rsplit(".", node.level - 1)[0] if node.level else ""
    module = ".".join(p for p in (base, node.module or "") if p)
    return {module, *(f"{module}.{alias.name}" for alias in node.names)}


def _cut_comment(line: str, strings: list[tuple[int, int]]) -> str:
    """`line` up to its first `#` outside every literal on it."""
    raw = line.encode("utf-8")
    at = raw.find(b"#")
    while at != -1:
        if not any(start <= at < stop for start, stop in strings):
            return raw[:at].decode("utf-8")
        at = raw.find(b"#", at + 1)
    return line
