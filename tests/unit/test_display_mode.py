"""Which display a wait gets: JSON when asked, live only on a capable terminal, plain else."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tasks.progress import Mode, choose_mode


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("term", "plain", "follow", "tty", "expected"),
    [
        ("xterm-256color", False, False, True, Mode.LIVE),
        ("xterm-256color", True, False, True, Mode.PLAIN),  # --plain
        ("xterm-256color", False, True, True, Mode.PLAIN),  # --follow writes the log
        ("dumb", False, False, True, Mode.PLAIN),  # TERM=dumb
        ("", False, False, True, Mode.PLAIN),
        ("xterm-256color", False, False, False, Mode.PLAIN),  # a pipe, CI
    ],
)
def test_mode(
    monkeypatch: pytest.MonkeyPatch, term: str, plain: bool, follow: bool, tty: bool, expected: Mode
) -> None:
    monkeypatch.setenv("TERM", term)
    out = Tty() if tty else io.StringIO()
    assert choose_mode(json_out=False, plain=plain, follow=follow, out=out) is expected
    assert choose_mode(json_out=True, plain=plain, follow=False, out=out) is Mode.JSON


def test_fab_list_does_not_import_rich() -> None:
    """The display library is imported only when a display is shown (start-up stays fast)."""
    import subprocess
    import sys

    code = "import sys, fabfile; assert 'rich' not in sys.modules, 'rich imported'"
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo)
    assert done.returncode == 0, done.stderr
