"""What the reliability suite did, counted: faults injected and bad inputs tried.

One module-level Counter (imported by its dotted name everywhere, so there is one instance);
tests/reliability/conftest.py prints it at the end of the session for the closing note.
"""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()


def fault(kind: str, n: int = 1) -> None:
    """A fault injected: a dropped connection, a crashed engine, a frozen peer, a full disk..."""
    COUNTS[f"fault: {kind}"] += n
    COUNTS["faults injected"] += n


def bad_input(kind: str, n: int = 1) -> None:
    """A malformed input tried: an inventory, a changed host key, a conflicting patch..."""
    COUNTS[f"input: {kind}"] += n
    COUNTS["bad inputs tried"] += n
