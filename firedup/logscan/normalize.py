"""From one raw log segment to a `Line`: clean text, the engine's message, and a timestamp.

A segment is what lies between two `\\r`/`\\n` bytes. Field logs arrive dressed in layers we
peel in order: terminal colour (escape bytes, or caret text `^[[0;36m` after a copy-paste),
NUL and other control bytes, then wrapper prefixes added by whatever collected the log
(docker --timestamps, compose `svc  | `, journalctl, kubectl --prefix, k9s borders), then the
engine's own prefix (SGLang `[date time RANKS]`, vLLM `(Proc pid=N) LEVEL MM-DD time [file:N]`,
uvicorn `INFO:     `, third-party `date time,ms - LEVEL - `).

A prefix of no known shape is still found: when a line does not start with the engine's
prefix but carries one further in (`vLLM STDOUT: INFO 07-05 ...`, `2025-03-07 ... - INFO -
[2025-03-07 23:50:27 TP0] ...`, `<b>(APIServer pid=1)</b> INFO ...`), everything before it is
a wrapper. A line that holds several records (a log flattened into one line) is cut at each
record's prefix. Wrappers with no engine record behind them are learned from the log itself
(wrappers.py).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache
from typing import NamedTuple, Optional, Tuple  # noqa: UP035 - RawStamp is built at runtime on 3.8

from firedup.logscan.harmless import is_routine
from firedup.logscan.signatures import EXCEPTION_LINE

# (year, month, day, hour, minute, second, microsecond); None where the log omits it.
RawStamp = Tuple[Optional[int], Optional[int], Optional[int], int, int, int, int]  # noqa: UP006, UP045

_ANSI = re.compile(
    r"(?:\x1b|\^\[)(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()][A-Z0-9])"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# A notebook's output viewer (Modal's, some Jupyter front ends) turns a tqdm count's `/6` and
# its unit's `/s`, `/it` into links to its own host: `1[/6](https://x.modal.host/6)`.
_SLASH_LINK = re.compile(r"\[(/\w{1,8})\]\(https?://[^)\s]*\)")

_WRAPPER = re.compile(
    r"(?P<k9s>[│┃║]\s?)"
    r"|(?P<kube>\[pod/[^\]]*\]\s)"
    r"|(?:(?P<jmon>[^\W\d_]{3,4}\.?) +(?P<jday>\d{1,2}) (?P<jtime>\d\d:\d\d:\d\d)"
    r"|(?P<jiso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)[+-]\d{4}) \S+ [\w.@/:-]+(?:\[\d+\])?: "
    r"|(?P<docker>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?:Z|[+-]\d\d:?\d\d)? "
    r"(?:std(?:out|err) [FP] )?"  # the kubelet's CRI log files: stream and partial-line tag
    # A log viewer's column (a cloud console, Grafana): `2025-03-11 09:47:23.058<TAB>`. A stamp
    # and a space is the program's own format (Python logging's asctime, KServe's): kept.
    r"|(?P<viewer>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\t"
    # A Markdown quote around the paste, and the blank columns a viewer's copy leaves.
    r"|(?P<quote>>[ \t]+)"
    # A Markdown code span or fence opened on the log's own first line (`` `Traceback ...``).
    r"|(?P<fence>`{1,3}(?=[^`\s]|[ \t]+File \"))"
    r"|(?P<compose>[\w.-]+ +\| ?)"
)
_K9S_TAIL = re.compile(r"\s*[│┃║]\s*$")
_TRACE = ("Traceback (most recent call last)", '  File "', 'File "')
_ENGINE_STARTS = ("[", "(", " ")
_LEVEL_STARTS = ("I", "W", "E", "D", "C", "T")

_SGLANG = re.compile(
    r"\[(?:(?P<date>\d{4}-\d\d-\d\d) )?(?P<time>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,6}))?"
    r"(?P<ranks>(?: [A-Z_]+\d+)*)\] ?"
)
_OLD_RANK = re.compile(r"\[(?P<ranks>(?:rank|gpu(?:_id)?)=\d+)\] ")
_VLLM_PROC = re.compile(r"\((?P<proc>[^()]*?)\bpid=\d+(?:, ip=[\w.:]+)?\) ")
_VLLM_LEVEL = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<md>\d\d-\d\d) "
    r"(?P<time>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d{1,6}))? \[?[^\s\]]+:\d+\] ?"
)
_THIRD_PARTY = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d),(?P<frac>\d{3}) - (?P<level>[A-Z]+) - "
)
_UVICORN_LEVEL = re.compile(r"(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s+")

# Where an engine record starts: a vLLM/Ray process tag, an SGLang stamp, a vLLM level stamp.
_RECORD = re.compile(
    r"\([^()]*?\bpid=\d+(?:, ip=[\w.:]+)?\)"
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z_]+\d+)*\]"
    r"|\[\d\d:\d\d:\d\d(?: [A-Z_]+\d+)+\]"  # SGLang's time-only stamp of 2024, with its ranks
    r"|\[(?:rank|gpu(?:_id)?)=\d+\] "  # SGLang 0.1-0.2's rank tag, its lines' only prefix
    r"|\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
)
_RECORD_HINT = re.compile(
    r"pid=|\[\d{4}-\d\d-\d\d |\[\d\d:\d\d:\d\d [A-Z]|\[(?:rank|gpu)\w*=\d"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-"
)
FLATTENED_MIN_CHARS = 200  # shorter lines hold one record; only long ones are searched

_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}


class Line(NamedTuple):  # a tuple: built for every line of a log, it must be cheap
    text: str  # what a human should see: colour, control bytes and wrappers removed
    message: str  # the engine's message with its own prefix removed
    stamp: RawStamp | None
    ranks: str = ""  # SGLang rank tag ("TP3", "DP0 TP0") or vLLM process name; "" if none
    level: str = ""


def clean(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text or "^[" in text:
        text = _ANSI.sub("", text)
    if not text.isprintable():
        text = _CONTROL.sub("", text)
    if "](" in text:
        text = _SLASH_LINK.sub(r"\1", text)
    return text


def parse_line(
    text: str,
    peel: Callable[[str], str] | None = None,
    saw: Callable[[str], None] | None = None,
) -> Line:
    """`peel` removes a wrapper learned from earlier lines, for lines with no known prefix;
    `saw` is told the wrapper found before an engine record further in the line."""
    stamp: RawStamp | None = None
    tag = ""  # the innermost process tag peeled (vLLM's, Ray's): it names the rank
    for _ in range(6):  # wrappers nest (k9s around compose around docker), never deeper
        if text[:1] == "(":  # process tags outside another wrapper are peeled with it
            inner_tag, rest = _process_tags(text, tag)
            if rest[:1] in " \t":  # a paste's indentation inside the tags
                rest = _unindented(rest)
            if rest is text or rest[:1] in _ENGINE_STARTS or _WRAPPER.match(rest) is None:
                break  # the engine's own tags, kept in the text a human sees
            tag, text = inner_tag, rest
        if text[:1] in " \t":  # a log pasted indented as a whole (a Markdown code block)
            text = _unindented(text)
        if text[:1] in _ENGINE_STARTS and not text.startswith("[pod/"):
            break  # the common case, an engine line with no wrapper: skip the regex
        match = _WRAPPER.match(text)
        if match is None:
            break
        stamp = _wrapper_stamp(match) or stamp
        text = text[match.end() :]
        if match.group("k9s"):
            text = _K9S_TAIL.sub("", text)
    message, own_stamp, ranks, level = _engine_prefix(text)
    if not level and own_stamp is None and not is_routine(message):
        # No engine prefix, or process tags alone: look further in (wrappers nest inside tags)
        inner = _embedded(message)
        if inner is None and peel is not None:
            inner = peel(message)
        elif inner is not None and saw is not None:
            saw(message[: len(message) - len(inner)])
        if inner is not None and inner is not message:
            text = text[: len(text) - len(message)] + inner
            message, own_stamp, inner_ranks, level = _engine_prefix(inner)
            ranks = inner_ranks or ranks
    if message[-1:] == " ":  # trailing blanks (an editor, a paste) mean nothing
        message = message.rstrip()
    return Line(text, message, stamp or own_stamp, ranks or tag, level)


def _process_tags(text: str, tag: str) -> tuple[str, str]:
    """`(EngineCore_DP0 pid=1) (Worker_TP0 pid=2) rest` -> ("Worker_TP0", "rest")."""
    match = _VLLM_PROC.match(text)
    while match is not None:  # tags nest: the innermost names the rank
        tag = match.group("proc").strip() or tag or "pid"
        text = text[match.end() :]
        match = _VLLM_PROC.match(text) if text[:1] == "(" else None
    return tag, text


def _unindented(text: str) -> str:
    """The line without the indentation a paste put in front of a collector's stamp; the
    indentation of the engine's own lines (code under a frame) is kept."""
    stripped = text.lstrip(" \t")
    if stripped[:4].isdigit() and stripped[4:5] == "-" and _WRAPPER.match(stripped) is not None:
        return stripped  # a dated stamp (docker's, journalctl's short-iso): `  12 | ` stays code
    return text


def engine_says(text: str) -> bool:
    """Whether the text is plainly the engine's own: a record, a traceback line, an exception."""
    return (
        _engine_prefix(text)[0] is not text
        or EXCEPTION_LINE.match(text) is not None
        or text.startswith(_TRACE)
    )


def _embedded(text: str) -> str | None:
    """The line from an engine record found past its start, or None."""
    if _RECORD_HINT.search(text, 1) is None or EXCEPTION_LINE.match(text):
        return None
    for tries, match in enumerate(_RECORD.finditer(text, 1)):
        if tries == 3 or "Traceback" in text[: match.start()]:
            return None
        inner = text[match.start() :]
        if _engine_prefix(inner)[0] is not inner:
            return inner
    return None


def split_records(text: str) -> list[str]:
    """A flattened line cut into its records; a line of one record comes back whole."""
    starts = []
    last_end = -2
    for match in _RECORD.finditer(text):
        if match.start() > last_end + 1:  # a process tag and its level stamp are one record
            starts.append(match.start())
        last_end = match.end()
    if len(starts) < 2:
        return [text]
    bounds = [0, *starts] if starts[0] else starts
    ends = [*bounds[1:], len(text)]
    return [text[a:b] for a, b in zip(bounds, ends) if text[a:b].strip()]  # noqa: B905 (3.8)


def _wrapper_stamp(match: re.Match[str]) -> RawStamp | None:
    if match.group("docker"):
        return _iso_stamp(match.group("docker"))
    if match.group("viewer"):
        return _iso_stamp(match.group("viewer").replace(" ", "T"))
    if match.group("jiso"):
        return _iso_stamp(match.group("jiso"))
    if match.group("jmon"):
        month = _MONTHS.get(match.group("jmon")[:3].capitalize())
        if month is None:  # a locale's month name (`авг`): the engine's own stamp tells
            return None
        return (None, month, int(match.group("jday")), *_hms(match.group("jtime")), 0)
    return None


def _engine_prefix(text: str) -> tuple[str, RawStamp | None, str, str]:
    stamp: RawStamp | None = None
    ranks = level = ""
    if text[:1] == "(":  # process tags nest: `(EngineCore_DP0 pid=1) (Worker_TP0 pid=2) `
        ranks, text = _process_tags(text, ranks)
    head = text[:1]
    if head == "[":
        match = _SGLANG.match(text)
        if match:
            stamp = _stamp(match.group("date"), match.group("time"), match.group("frac"))
            ranks = match.group("ranks").strip() or ranks
            text = text[match.end() :]
        if text[:1] == "[" and (match is None or not match.group("ranks")):
            text, inner = _inner_tag(text, stamped=match is not None)
            ranks = inner or ranks
        head = text[:1]
    elif head.isdigit():
        match = _THIRD_PARTY.match(text)
        if match:
            stamp = _stamp(match.group("date"), match.group("time"), match.group("frac"))
            return text[match.end() :], stamp, ranks, match.group("level")
    if head in _LEVEL_STARTS:
        match = _VLLM_LEVEL.match(text)
        if match:
            level = match.group("level")
            stamp = _month_day_stamp(match.group("md"), match.group("time"), match.group("frac"))
            text = text[match.end() :]
        uvicorn = _UVICORN_LEVEL.match(text) if text[:1] in _LEVEL_STARTS else None
        if uvicorn:
            level = level or uvicorn.group("level")
            text = text[uvicorn.end() :]
    return text, stamp, ranks, level


def _inner_tag(text: str, *, stamped: bool) -> tuple[str, str]:
    """The text after SGLang's own `[stamp TP0] ` inside a collector's bare `[stamp] `, or
    after SGLang 0.1.x's rank tag (`[rank=1] `, `[gpu_id=1] `: model_runner.py), and its ranks."""
    match = (_SGLANG.match(text) if stamped else None) or _OLD_RANK.match(text)
    if match is None:
        return text, ""
    return text[match.end() :], match.group("ranks").strip()


@lru_cache(maxsize=64)  # neighbouring lines share their second: parse each stamp once
def _stamp(date: str | None, time: str, frac: str | None) -> RawStamp:
    if date is None:
        return (None, None, None, *_hms(time), _micro(frac))
    year, month, day = date.split("-")
    return (int(year), int(month), int(day), *_hms(time), _micro(frac))


@lru_cache(maxsize=64)
def _month_day_stamp(month_day: str, time: str, frac: str | None) -> RawStamp:
    month, day = month_day.split("-")
    return (None, int(month), int(day), *_hms(time), _micro(frac))


def _iso_stamp(text: str) -> RawStamp:
    date, _, rest = text.partition("T")
    time, _, frac = rest.partition(".")
    return _stamp(date, time, frac or None)


def _hms(time: str) -> tuple[int, int, int]:
    hour, minute, second = time.split(":")
    return int(hour), int(minute), int(second)


def _micro(frac: str | None) -> int:
    return int(frac[:6].ljust(6, "0")) if frac else 0


class Clock:
    """Turns partial timestamps into datetimes, borrowing what they omit from earlier lines.

    vLLM and journalctl print no year and old SGLang prints only the time of day; the missing
    parts come from the last complete timestamp, else from `year` (the caller may know it:
    the file's mtime, today), else 1900-01-01. A time-only stamp that jumps back by more than
    12 hours has crossed midnight.
    """

    def __init__(self, year: int | None = None) -> None:
        self.last: datetime | None = None
        self._year = year
        self._cache: tuple[RawStamp, datetime] | None = None

    def resolve(self, raw: RawStamp | None) -> datetime | None:
        if raw is None:
            return None
        if self._cache is not None and self._cache[0] == raw:
            return self._cache[1]
        moment = self._build(raw)
        if moment is not None:
            self.last = moment
            self._cache = (raw, moment)
        return moment

    def _build(self, raw: RawStamp) -> datetime | None:
        year, month, day, hour, minute, second, micro = raw
        try:
            if year is not None and month is not None and day is not None:
                self._year = year
                return datetime(year, month, day, hour, minute, second, micro)
            if month is not None and day is not None:
                return datetime(
                    self._guess_year(month, day), month, day, hour, minute, second, micro
                )
            return self._time_only(hour, minute, second, micro)
        except ValueError:  # an impossible date is noise, not a reason to fail the scan
            return None

    def _guess_year(self, month: int, day: int) -> int:
        year = self._year or (self.last.year if self.last else 1900)
        if (month, day) == (2, 29) and not calendar.isleap(year):
            return 2000
        return year

    def _time_only(self, hour: int, minute: int, second: int, micro: int) -> datetime:
        base = self.last or datetime(self._year or 1900, 1, 1)
        moment = base.replace(hour=hour, minute=minute, second=second, microsecond=micro)
        if self.last is not None and moment < self.last - timedelta(hours=12):
            moment += timedelta(days=1)
        return moment
