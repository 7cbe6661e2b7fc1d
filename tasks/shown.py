"""The output edge: every string a task shows passes `shown` (masked, then made inert) on its
way to a terminal, whoever wrote it: the core, the node, the server's log.

`mask` hides the deployment's secrets (firedup/config/secrets.py); `inert`
(firedup/inert.py) shows control and escape sequences as text. `fab logs --raw` is the one
way to get a log's bytes as the node has them (still masked).
"""

from __future__ import annotations

from firedup.config.secrets import mask
from firedup.inert import inert


def shown(text: str) -> str:
    """`text` fit for the operator's terminal: secrets masked, escape sequences inert."""
    return inert(mask(text))


def log_text(data: bytes, *, raw: bool = False) -> str:
    """A chunk of a server log for a terminal: a CR (a progress bar redrawing its line) ends
    a line, as a pager shows it; `raw`: the bytes as the node has them, masked only."""
    text = data.decode("utf-8", "replace")
    if raw:
        return mask(text)
    return shown(text.replace("\r\n", "\n").replace("\r", "\n"))
