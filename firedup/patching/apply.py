"""Apply (or reverse) a parsed file patch exactly: no fuzz, no whitespace or line-ending slack.

A hunk may move (an offset, as when an unrelated edit shifted the file), but only to a place
where every context and removed line matches byte for byte, and only when that place is
unambiguous. Anything else is a `HunkConflict` naming the file and the hunk.
"""

from __future__ import annotations

from enum import Enum

from firedup.patching.diff import FilePatch, Hunk, Op, split_lines


class HunkConflict(Exception):
    """A hunk that does not apply exactly; `hunk_no` is 1-based, as a reader counts them."""

    def __init__(self, path: str, hunk_no: int, header: str, reason: str) -> None:
        super().__init__(f"{path}: hunk #{hunk_no} ({header}): {reason}")
        self.path = path
        self.hunk_no = hunk_no
        self.header = header
        self.reason = reason


def _matches(lines: list[bytes], old: list[bytes], at: int) -> bool:
    return at >= 0 and lines[at : at + len(old)] == old


def _first_difference(lines: list[bytes], old: list[bytes], at: int) -> str:
    """Describe why `old` does not match at `at`, for the conflict message."""
    for k, want in enumerate(old):
        got = lines[at + k] if 0 <= at + k < len(lines) else None
        if got == want:
            continue
        if got is None:
            return f"file ends at line {len(lines)}, expected {want!r} at line {at + k + 1}"
        if got.rstrip(b"\r\n") == want.rstrip(b"\r\n"):
            ends = f"file {got[-2:]!r}, patch {want[-2:]!r}"
            return f"line {at + k + 1}: line endings differ ({ends})"
        return f"line {at + k + 1}: expected {want!r}, found {got!r}"
    return "no match"


class Anchor(Enum):
    NONE = "none"
    START = "start"
    END = "end"


def anchor(hunk: Hunk, start: int) -> Anchor:
    """Shorter context on one side means diff met the file's edge there (GNU patch's rule).

    This is what makes an appending hunk (`x = 1` then `+y = 2`, nothing after) refuse an
    already-patched file instead of appending twice.
    """
    ops = [ln.op for ln in hunk.lines]
    lead = next((i for i, op in enumerate(ops) if op is not Op.CONTEXT), len(ops))
    trail = next((i for i, op in enumerate(reversed(ops)) if op is not Op.CONTEXT), len(ops))
    if lead < trail and start == 0:
        return Anchor.START
    if trail < lead:
        return Anchor.END
    return Anchor.NONE


def _place_anchored(
    lines: list[bytes], old: list[bytes], at: int, floor: int, edge: str
) -> int | str:
    if at >= floor and _matches(lines, old, at):
        return at
    reason = _first_difference(lines, old, max(at, floor))
    return f"must sit at the {edge} of the file (its context stops there): {reason}"


def _place(
    lines: list[bytes], old: list[bytes], expected: int, floor: int, edge: Anchor
) -> int | str:
    """Where the hunk's old side sits: an index, or the reason it sits nowhere."""
    if not old:  # pure insertion without context: only its stated position is meaningful
        return expected if floor <= expected <= len(lines) else "insertion point out of range"
    if edge is Anchor.START:
        return _place_anchored(lines, old, 0, floor, "start")
    if edge is Anchor.END:
        return _place_anchored(lines, old, len(lines) - len(old), floor, "end")
    if expected >= floor and _matches(lines, old, expected):
        return expected
    found = [at for at in range(floor, len(lines) - len(old) + 1) if _matches(lines, old, at)]
    if len(found) == 1:
        return found[0]
    if found:
        lines_at = ", ".join(str(at + 1) for at in found[:5])
        return f"context is ambiguous: it matches at lines {lines_at}; refusing to guess"
    return _first_difference(lines, old, max(expected, floor))


def _start(hunk: Hunk, *, reverse: bool) -> int:
    start, length = (hunk.new_start, hunk.new_len) if reverse else (hunk.old_start, hunk.old_len)
    # An empty side names the line *before* it ("-0,0" inserts at the top).
    return start if length == 0 else start - 1


def apply_patch(original: bytes | None, patch: FilePatch, *, reverse: bool = False) -> bytes | None:
    """The patched (or, with `reverse`, unpatched) bytes; raise HunkConflict when not exact.

    None stands for "no such file", on both sides: a new-file patch applies only to a missing
    file, and reversing it gives None (the file goes away) only if it is exactly its content.
    """
    if patch.creates:
        return _apply_creation(original, patch, reverse=reverse)
    if original is None:
        raise HunkConflict(patch.path, 1, patch.hunks[0].header, "file does not exist")
    lines = split_lines(original)
    out: list[bytes] = []
    cursor = drift = 0
    for n, hunk in enumerate(patch.hunks, start=1):
        old, new = hunk.side(new=reverse), hunk.side(new=not reverse)
        start = _start(hunk, reverse=reverse)
        at = _place(lines, old, start + drift, cursor, anchor(hunk, start))
        if isinstance(at, str):
            raise HunkConflict(patch.path, n, hunk.header, at)
        drift = at - start
        out.extend(lines[cursor:at])
        out.extend(new)
        cursor = at + len(old)
    out.extend(lines[cursor:])
    return b"".join(out)


def _apply_creation(original: bytes | None, patch: FilePatch, *, reverse: bool) -> bytes | None:
    hunk = patch.hunks[0]
    content = b"".join(hunk.side(new=True))
    if len(patch.hunks) != 1 or hunk.side(new=False):
        raise HunkConflict(patch.path, 1, hunk.header, "a new-file patch must be one pure hunk")
    if reverse:
        if original != content:
            raise HunkConflict(patch.path, 1, hunk.header, "file differs from the patch's content")
        return None
    if original is not None:
        raise HunkConflict(patch.path, 1, hunk.header, "file to be created already exists")
    return content
