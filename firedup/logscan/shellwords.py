"""The shell's report of a signal that killed its child, in the locale's words: data for the
failure table (signatures.py builds its rows from it).

bash names the signal with strsignal(), which glibc translates (libc.mo: `Segmentation fault`,
`Killed`), alone (`段错误 (核心已转储)`) or in its job report (`run.sh: 行 3: 12345 段错误
（核心已转储） python serve.py`; "line" and "core dumped" are translated too). The English
names have rows of their own in the table.
"""

from __future__ import annotations

import re

from firedup.logscan.model import Reason

SHELL_DEATHS: tuple[tuple[Reason, str], ...] = (
    *(
        (Reason.CRASH, name)
        for name in (
            "段错误",  # zh_CN
            "程式記憶體區段錯誤",  # zh_TW
            "세그멘테이션 오류",  # ko
            "Speicherzugriffsfehler",  # de
            "Erreur de segmentation",  # fr
            "Violación de segmento",  # es
            "Ошибка сегментирования",  # ru
            "Falha de segmentação",  # pt_BR
            "Errore di segmentazione",  # it
            "Naruszenie ochrony pamięci",  # pl
        )
    ),
    *((Reason.KILLED, name) for name in ("已杀死", "強制終了", "Getötet", "Убито", "Unicestwiony")),
)


def shell_reports(name: str) -> str:
    """The pattern of a line that is the shell's report of that death: the name alone (a core
    dump noted after it), or after a job report's pid (the command after it)."""
    word = re.escape(name)
    return rf"^(?:.*\s\d+\s+{word}(?:\s|$)|{word}\s*(?:[(（][^)）]*[)）])?\s*$)"
