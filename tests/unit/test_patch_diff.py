"""The unified-diff parser and the exact applier, on diffs recorded from GNU diff and git."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firedup.patching.apply import HunkConflict, apply_patch
from firedup.patching.diff import DiffSyntaxError, FilePatch, Op, parse_diff

TEN = b"".join(b"%s\n" % w for w in b"one two three four five six seven eight nine ten".split())

# `diff -u a.txt b.txt` (headers renamed): one change and a last line without a newline.
RECORDED_GNU = b"""--- a/pkg/f.txt
+++ b/pkg/f.txt
@@ -1,10 +1,11 @@
 one
 two
 three
-four
+FOUR
 five
 six
 seven
 eight
 nine
 ten
+eleven
\\ No newline at end of file
"""

# `git diff` of two files, two hunks in the first: git's extra header lines are skipped.
RECORDED_GIT = b"\n".join(
    [
        b"diff --git a/pkg/m.py b/pkg/m.py",
        b"index 3b18e51..a1c2f0e 100644",
        b"--- a/pkg/m.py",
        b"+++ b/pkg/m.py",
        b"@@ -1,4 +1,4 @@",
        b"-import os",
        b"+import sys",
        b" ",
        b" ",
        b" def a():",
        b"@@ -10,3 +10,5 @@ def b():",
        b"     pass",
        b" ",
        b" ",
        b"+def c():",
        b"+    pass",
        b"diff --git a/pkg/new.py b/pkg/new.py",
        b"new file mode 100644",
        b"index 0000000..e69de29",
        b"--- /dev/null",
        b"+++ b/pkg/new.py",
        b"@@ -0,0 +1,2 @@",
        b"+# created by the patch",
        b"+VALUE = 1",
        b"",
    ]
)

M_PY = b"import os\n\n\ndef a():\n    pass\n\n\ndef b():\n    pass\n    pass\n\n\n"


def one(diff: bytes) -> FilePatch:
    (fp,) = parse_diff(diff)
    return fp


def test_parses_recorded_gnu_diff_with_no_newline_marker() -> None:
    fp = one(RECORDED_GNU)
    assert fp.path == "pkg/f.txt" and not fp.creates
    (hunk,) = fp.hunks
    assert (hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len) == (1, 10, 1, 11)
    assert hunk.lines[-1].op is Op.ADD and hunk.lines[-1].text == b"eleven"  # no newline
    assert hunk.lines[-2].text == b"ten\n"


def test_applies_and_reverses_recorded_gnu_diff() -> None:
    fp = one(RECORDED_GNU)
    expected = TEN.replace(b"four", b"FOUR") + b"eleven"
    assert apply_patch(TEN, fp) == expected
    assert apply_patch(expected, fp, reverse=True) == TEN


def test_parses_git_diff_with_two_files_and_a_new_file() -> None:
    m, new = parse_diff(RECORDED_GIT)
    assert m.path == "pkg/m.py" and len(m.hunks) == 2
    assert new.path == "pkg/new.py" and new.creates
    patched = apply_patch(M_PY, m)
    assert patched == M_PY.replace(b"import os", b"import sys") + b"def c():\n    pass\n"
    assert apply_patch(patched, m, reverse=True) == M_PY


def test_new_file_is_created_only_where_none_exists() -> None:
    _, new = parse_diff(RECORDED_GIT)
    content = b"# created by the patch\nVALUE = 1\n"
    assert apply_patch(None, new) == content
    with pytest.raises(HunkConflict, match="already exists"):
        apply_patch(b"something else\n", new)
    assert apply_patch(content, new, reverse=True) is None
    with pytest.raises(HunkConflict, match="differs"):
        apply_patch(content + b"# edited\n", new, reverse=True)


def test_offset_is_accepted_when_the_context_is_exact_and_unique() -> None:
    shifted = b"# a\n# new\n# header\n" + TEN
    result = apply_patch(shifted, one(RECORDED_GNU))
    assert result == b"# a\n# new\n# header\n" + TEN.replace(b"four", b"FOUR") + b"eleven"


def test_a_changed_context_line_is_refused_not_fuzzed() -> None:
    # GNU patch applies this with "fuzz 1"; we refuse and say where.
    changed = TEN.replace(b"two\n", b"TWO\n")
    with pytest.raises(HunkConflict) as err:
        apply_patch(changed, one(RECORDED_GNU))
    assert err.value.path == "pkg/f.txt" and err.value.hunk_no == 1
    assert err.value.header == "@@ -1,10 +1,11 @@"
    assert "line 2: expected b'two\\n', found b'TWO\\n'" in str(err.value)


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch not installed")
def test_gnu_patch_would_have_fuzzed_what_we_refuse(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(TEN.replace(b"one\n", b"ONE\n"))
    run = subprocess.run(
        ["patch", "--dry-run", "-p2", "f.txt"],
        input=RECORDED_GNU,
        cwd=tmp_path,
        capture_output=True,
    )
    assert run.returncode == 0 and b"fuzz" in run.stdout
    with pytest.raises(HunkConflict):
        apply_patch(TEN.replace(b"one\n", b"ONE\n"), one(RECORDED_GNU))


def test_appending_hunk_is_anchored_at_the_end_so_it_never_applies_twice() -> None:
    # Two context lines before, none after: diff met the end of the file (GNU patch's rule).
    diff = b"--- a/p/x\n+++ b/p/x\n@@ -1,2 +1,3 @@\n a\n b\n+c\n"
    once = apply_patch(b"a\nb\n", one(diff))
    assert once == b"a\nb\nc\n"
    with pytest.raises(HunkConflict, match="must sit at the end of the file"):
        apply_patch(once, one(diff))
    assert apply_patch(once, one(diff), reverse=True) == b"a\nb\n"


def test_prepending_hunk_is_anchored_at_the_start() -> None:
    diff = b"--- a/p/x\n+++ b/p/x\n@@ -1,2 +1,3 @@\n+top\n a\n b\n"
    with pytest.raises(HunkConflict, match="must sit at the start of the file"):
        apply_patch(b"zero\na\nb\n", one(diff))


def test_trailing_whitespace_difference_is_a_conflict() -> None:
    with pytest.raises(HunkConflict, match="line 5"):
        apply_patch(TEN.replace(b"five\n", b"five \n"), one(RECORDED_GNU))


def test_ambiguous_context_is_refused() -> None:
    diff = b"--- a/p/x\n+++ b/p/x\n@@ -20,2 +20,3 @@\n a\n+NEW\n b\n"
    with pytest.raises(HunkConflict, match="ambiguous: it matches at lines 1, 4"):
        apply_patch(b"a\nb\nc\na\nb\n", one(diff))


def test_hunks_must_not_overlap_or_reorder() -> None:
    diff = b"--- a/p/x\n+++ b/p/x\n@@ -3,1 +3,1 @@\n-c\n+C\n@@ -1,1 +1,1 @@\n-a\n+A\n"
    with pytest.raises(HunkConflict) as err:
        apply_patch(b"a\nb\nc\n", one(diff))
    assert err.value.hunk_no == 2


# A diff made on a CRLF file (`diff -u c.py d.py`): the \r stays part of each line.
RECORDED_CRLF = (
    b"--- a/p/c.py\t2026-11-29 18:24:21 +0000\n+++ b/p/c.py\t2026-11-29 18:24:21 +0000\n"
    b"@@ -1,3 +1,3 @@\n x = 1\r\n-y = 2\r\n+y = 20\r\n z = 3\r\n"
)


def test_crlf_files_patch_byte_exact() -> None:
    crlf = b"x = 1\r\ny = 2\r\nz = 3\r\n"
    assert apply_patch(crlf, one(RECORDED_CRLF)) == b"x = 1\r\ny = 20\r\nz = 3\r\n"


def test_line_ending_mismatch_is_named() -> None:
    with pytest.raises(HunkConflict, match="line endings differ"):
        apply_patch(b"x = 1\ny = 2\nz = 3\n", one(RECORDED_CRLF))


def test_adding_a_newline_at_end_of_file() -> None:
    diff = b"--- a/p/x\n+++ b/p/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    assert apply_patch(b"a\nb", one(diff)) == b"a\nb\n"
    with pytest.raises(HunkConflict):
        apply_patch(b"a\nb\n", one(diff))  # the file already ends in a newline


def test_missing_file_is_a_conflict() -> None:
    with pytest.raises(HunkConflict, match="does not exist"):
        apply_patch(None, one(RECORDED_GNU))


SIMPLE = b"--- a/p/x\n+++ b/p/x\n@@ -1 +1 @@\n-a\n+b\n"


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        (b"nothing here\n", "no file sections"),
        (b"@@ -1 +1 @@\n-a\n+b\n", "hunk outside a file section"),
        (b"--- a/p/x\n+++ b/p/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", "promises 2/2 lines, has 1/1"),
        (b"--- a/p/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", "deleting files"),
        (b"--- a/p/x\n+++ b/p/y\n@@ -1 +1 @@\n-a\n+b\n", "renames"),
        (b"--- a/../etc/x\n+++ b/../etc/x\n@@ -1 +1 @@\n-a\n+b\n", "unsafe"),
        (b"--- a/p/x\n+++ b/p/x\n", "no hunks"),
        (b"diff --git a/p b/p\nGIT binary patch\nliteral 0\n", "unsupported"),
        (b"--- a/p/x\n+++ b/p/x\n@@ -1 +1 @@\n?a\n+b\n", "unexpected line"),
        (SIMPLE + SIMPLE, "appears twice"),
    ],
)
def test_malformed_or_unsupported_diffs_are_refused(diff: bytes, message: str) -> None:
    with pytest.raises(DiffSyntaxError, match=message):
        parse_diff(diff)


# Property: whatever GNU diff writes for two versions of a file, applying it gives the new
# version byte for byte, and reversing gives the old one (CRLF, missing final newline and all).
_line = st.sampled_from([b"a", b"b", b"c", b"", b"x = 1", b"  y", b"a\r"])
_text = st.lists(_line, max_size=12).flatmap(
    lambda lines: st.sampled_from([b"\n", b"\r\n"]).flatmap(
        lambda eol: st.booleans().map(
            lambda final: eol.join(lines) + (eol if final and lines else b"")
        )
    )
)


@pytest.mark.skipif(shutil.which("diff") is None, reason="GNU diff not installed")
@settings(max_examples=60, deadline=None)
@given(old=_text, new=_text)
def test_round_trip_against_gnu_diff(
    tmp_path_factory: pytest.TempPathFactory, old: bytes, new: bytes
) -> None:
    d = tmp_path_factory.mktemp("rt")
    (d / "old").write_bytes(old)
    (d / "new").write_bytes(new)
    out = subprocess.run(["diff", "-u", "old", "new"], cwd=d, capture_output=True).stdout
    if not out:
        assert old == new
        return
    diff = out.replace(b"--- old", b"--- a/p/f", 1).replace(b"+++ new", b"+++ b/p/f", 1)
    fp = one(diff)
    assert apply_patch(old, fp) == new
    assert apply_patch(new, fp, reverse=True) == old
