"""Issue 28 §2: the one output edge. What a node or a log says reaches a terminal inert."""

from __future__ import annotations

import io
import json

from rich.console import Console

from firedup.inert import has_unsafe, inert
from tasks.live import Cell, line
from tasks.shown import log_text, shown

HOSTILE = (
    "\x1b[2J\x1b[H"  # clear the screen, cursor home
    "\x1b]0;owned\x07"  # set the window title
    "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # OSC 52: write the clipboard
    "\x9b31m"  # a C1 CSI
    "\u202eevil"  # a bidi override
    "[bold]x[/bold]"  # rich markup
)


def test_every_control_and_escape_is_shown_as_text() -> None:
    out = inert(HOSTILE)
    assert not has_unsafe(out)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert out.startswith("\\x1b[2J\\x1b[H\\x1b]0;owned\\x07")
    assert "\\u009b31m" in out and "\\u202eevil" in out and "[bold]x[/bold]" in out


def test_ordinary_text_is_left_alone() -> None:
    text = "GPU 0: 81 GB free\ttp=2\nline two ✓ ━━ ünïcode"
    assert inert(text) is text
    assert inert("a\r\nb") == "a\nb"
    assert inert("PASS\rFAIL") == "PASS\\x0dFAIL"  # a lone CR cannot overwrite the line


def test_json_stays_json_through_the_edge() -> None:
    # --json goes through the same edge: its escapes must still be valid JSON.
    text = json.dumps({"name": HOSTILE + "\x7f"}, ensure_ascii=False)
    assert json.loads(shown(text))["name"].startswith("\x1b[2J")  # the value, escaped by JSON
    assert not has_unsafe(shown(text))


def test_log_chunks_are_inert_unless_raw() -> None:
    data = HOSTILE.encode() + b"\nloading 50%\rloading 100%\n\xff"
    assert not has_unsafe(log_text(data))
    assert "loading 50%\nloading 100%" in log_text(data)
    assert "\x1b]52;" in log_text(data, raw=True)


def test_rich_sees_no_escape_and_no_markup() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=200)
    console.print(line([Cell(HOSTILE, 100), Cell("[red]r[/red]", 90)], 199))
    printed = out.getvalue()
    assert "\x1b]" not in printed and "\x9b" not in printed
    assert "[bold]x[/bold]" in printed and "[red]r[/red]" in printed


def test_every_task_output_goes_through_the_edge() -> None:
    """The output edge stays one: no task masks by itself (which would skip `inert`), and
    every print or write in tasks/ shows text that passed `shown` or `log_text`, except the
    few listed here that print nothing from a node."""
    import ast
    from pathlib import Path

    tasks = Path(__file__).resolve().parents[2] / "tasks"
    allowed = {  # (file, source of the printed value): none of it comes from a node or a log
        ("cli.py", 'f"firedup {__version__}"'),
        ("deploy.py", "plan.script.text"),  # `fab render`: the operator's own rendered script
        ("deploy.py", "plan.script.inner"),  # and in a container, its engine.sh
        ("progress.py", "text"),  # log_text(chunk), prefixed per host
        ("top.py", "top_table(rows, _width(console))"),  # every cell is shown(...) as Text
    }
    bad = []
    for path in sorted(tasks.glob("*.py")):
        if path.name == "shown.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            masks = isinstance(node, ast.ImportFrom) and node.module == "firedup.config.secrets"
            if masks and any(a.name == "mask" for a in node.names):  # type: ignore[union-attr]
                bad.append(f"{path.name}: imports mask (use tasks.shown.shown)")
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in ("print", "write") or path.name == "live.py":
                continue  # live.py: rich Text built from Cells, each through `shown`
            source = ast.get_source_segment(path.read_text(), node.args[0]) or ""
            through = any(f in source for f in ("shown(", "log_text(", '"".join(shown('))
            if not through and (path.name, source) not in allowed:
                bad.append(f"{path.name}:{node.lineno}: {source}")
    assert not bad, bad
