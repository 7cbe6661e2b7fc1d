"""A strict parser for unified diffs, working on bytes so line endings survive exactly.

Only what a patch for an installed package needs: modified and new text files. Paths are
taken from the `---`/`+++` headers with one leading component stripped (`a/`, `b/`, as `git
diff` and `diff -u a/ b/` write them). Anything this parser does not understand (binary
patches, renames, deletions, hunk line counts that do not add up) is an error, never a guess.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import Enum

DEV_NULL = "/dev/null"
_HUNK_HEADER = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_UNSUPPORTED = (b"GIT binary patch", b"Binary files ", b"rename from ", b"copy from ")


class DiffSyntaxError(ValueError):
    """The diff text is malformed or uses a feature firedup refuses to apply."""

    def __init__(self, message: str, line_no: int | None = None) -> None:
        where = f"line {line_no}: " if line_no is not None else ""
        super().__init__(f"{where}{message}")


class Op(Enum):
    CONTEXT = " "
    REMOVE = "-"
    ADD = "+"


@dataclass(frozen=True)
class HunkLine:
    op: Op
    text: bytes  # the exact line, with its line ending (none on a last line without one)


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[HunkLine, ...]

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"

    def side(self, *, new: bool) -> list[bytes]:
        """The lines this hunk expects (old side) or produces (new side)."""
        keep = Op.ADD if new else Op.REMOVE
        return [ln.text for ln in self.lines if ln.op in (Op.CONTEXT, keep)]


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative, one component stripped: "sglang/srt/models/kimi_k25.py"
    creates: bool  # the old side is /dev/null
    hunks: tuple[Hunk, ...]


def split_lines(data: bytes) -> list[bytes]:
    """Split on b"\\n" only, keeping it: a "\\r" stays part of its line (CRLF files, stray CRs)."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _header_path(line: bytes, line_no: int) -> str:
    raw = line[4:].split(b"\t", 1)[0].rstrip(b"\r\n")
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DiffSyntaxError("file name is not UTF-8", line_no) from None
    if name.startswith('"'):
        raise DiffSyntaxError(f"quoted file names are not supported: {name}", line_no)
    if name == DEV_NULL:
        return DEV_NULL
    if "/" not in name:
        raise DiffSyntaxError(f"expected a/<path> or b/<path>, got {name!r}", line_no)
    path = name.split("/", 1)[1]
    normal = posixpath.normpath(path)
    if normal != path or path.startswith("/") or ".." in path.split("/"):
        raise DiffSyntaxError(f"unsafe or non-normal path {path!r}", line_no)
    return path


def _parse_hunk(lines: list[bytes], i: int) -> tuple[Hunk, int]:
    m = _HUNK_HEADER.match(lines[i])
    if m is None:
        raise DiffSyntaxError(f"bad hunk header {lines[i][:60]!r}", i + 1)
    old_start, new_start = int(m[1]), int(m[3])
    old_len = int(m[2]) if m[2] is not None else 1
    new_len = int(m[4]) if m[4] is not None else 1
    body: list[HunkLine] = []
    old_seen = new_seen = 0
    i += 1
    while i < len(lines) and (old_seen < old_len or new_seen < new_len):
        line = lines[i]
        if line.startswith(b"\\"):
            if not body:
                raise DiffSyntaxError("'No newline at end of file' before any line", i + 1)
            body[-1] = _strip_eol(body[-1], i)
            i += 1
            continue
        # A bare empty line is an empty context line whose leading space was stripped.
        op = Op.CONTEXT if line in (b"\n", b"\r\n") else _op(line, i)
        text = line if line in (b"\n", b"\r\n") else line[1:]
        body.append(HunkLine(op, text))
        old_seen += op is not Op.ADD
        new_seen += op is not Op.REMOVE
        i += 1
    if old_seen != old_len or new_seen != new_len:
        raise DiffSyntaxError(
            f"hunk {m[0].decode()} promises {old_len}/{new_len} lines, has {old_seen}/{new_seen}", i
        )
    if i < len(lines) and lines[i].startswith(b"\\"):
        body[-1] = _strip_eol(body[-1], i)
        i += 1
    return Hunk(old_start, old_len, new_start, new_len, tuple(body)), i


def _op(line: bytes, i: int) -> Op:
    try:
        return Op(chr(line[0]))
    except ValueError:
        raise DiffSyntaxError(f"unexpected line in hunk: {line[:60]!r}", i + 1) from None


def _strip_eol(line: HunkLine, i: int) -> HunkLine:
    if not line.text.endswith(b"\n"):
        raise DiffSyntaxError("two 'No newline at end of file' markers for one line", i + 1)
    return HunkLine(line.op, line.text[:-1])


def _parse_file(lines: list[bytes], i: int) -> tuple[FilePatch, int]:
    old = _header_path(lines[i], i + 1)
    if i + 1 >= len(lines) or not lines[i + 1].startswith(b"+++ "):
        raise DiffSyntaxError("'---' header not followed by '+++'", i + 1)
    new = _header_path(lines[i + 1], i + 2)
    if new == DEV_NULL:
        raise DiffSyntaxError(f"deleting files is not supported ({old})", i + 2)
    if old not in (DEV_NULL, new):
        raise DiffSyntaxError(f"renames are not supported ({old} -> {new})", i + 1)
    i += 2
    hunks: list[Hunk] = []
    while i < len(lines) and lines[i].startswith(b"@@"):
        hunk, i = _parse_hunk(lines, i)
        hunks.append(hunk)
    if not hunks:
        raise DiffSyntaxError(f"no hunks for {new}", i)
    return FilePatch(new, old == DEV_NULL, tuple(hunks)), i


def parse_diff(data: bytes) -> tuple[FilePatch, ...]:
    """Parse a unified diff into per-file hunks; text outside file sections is ignored."""
    lines = split_lines(data)
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(_UNSUPPORTED):
            raise DiffSyntaxError(f"unsupported diff feature: {line.strip()[:60]!r}", i + 1)
        if line.startswith(b"--- "):
            patch, i = _parse_file(lines, i)
            if any(f.path == patch.path for f in files):
                raise DiffSyntaxError(f"{patch.path} appears twice", i)
            files.append(patch)
            continue
        if line.startswith(b"@@"):
            raise DiffSyntaxError("hunk outside a file section", i + 1)
        i += 1
    if not files:
        raise DiffSyntaxError("no file sections (--- / +++) found")
    return tuple(files)
