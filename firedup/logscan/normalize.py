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

import re
from collections.abc import Callable
from typing import NamedTuple

from firedup.logscan.clock import Clock as Clock  # where the scanner and tests look
from firedup.logscan.clock import RawStamp, hms, iso_stamp, month_day_stamp, stamp_of
from firedup.logscan.damage import docker_record, glued_traceback, json_dumped, unescape_entities
from firedup.logscan.frames import EXCEPTION_LINE
from firedup.logscan.harmless import is_routine

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
    r"|(?P<jiso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d))(?:\.\d+)?(?(jiso)[+-]\d{4}) "
    r"\S+ [\w.@/:-]+(?:\[\d+\])?: "  # journalctl's short, short-iso and their -precise
    r"|(?P<docker>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?:Z|[+-]\d\d:?\d\d)? "
    r"(?:std(?:out|err) [FP] )?"  # the kubelet's CRI log files: stream and partial-line tag
    # A log viewer's column (a cloud console, Grafana): `2025-03-11 09:47:23.058<TAB>`. A stamp
    # and a space is the program's own format (Python logging's asctime, KServe's): kept.
    r"|(?P<viewer>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\t"
    # A Markdown quote around the paste, and the blank columns a viewer's copy leaves.
    r"|(?P<quote>>(?:[ \t]*\t[ \t]*|[ \t]))"  # blanks with a tab: a viewer's; spaces: the log's
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
    r"(?P<time>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d{1,6}))? (?:\[?[^\s\]]+:\d+\] ?|\[?[^\s\]]*$)"
)  # a hard wrap may cut the line inside `[file:N]`: the rest is the next line's (_TAIL)
_TAIL = re.compile(r"(?:[\d:.]{1,8} \[|\[)?[\w.-]*\.py:\d+\] ")  # the wrap's rest of `[file.py:N] `
_THIRD_PARTY = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d),(?P<frac>\d{3}) - (?P<level>[A-Z]+) - "
)
# A stamp after the message (lmcache_vllm 0.1's logger, 2024): `%(levelname)s %(name)s:
# %(message)s [%(asctime)s] -- %(pathname)s:%(lineno)d`.
_STAMP_AFTER = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<message>[\w.-]+: .*) \[(?P<date>\d{4}-"
    r"\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,6}))?\] -- \S+:\d+$"
)
_TRAILING = re.compile(r"\[[^\]]*\] -- \S+:\d+$")
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
_LOOK = 160  # a record behind a wrapper starts this near the line's start
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
    if text.startswith('{"log":'):
        text = docker_record(text)
    if "\x1b" in text or "^[" in text:
        text = _ANSI.sub("", text)
    if not text.isprintable():
        text = _CONTROL.sub("", text)
    if "&" in text:  # a log copied from a web page's text kept its entities (`&quot;`)
        text = unescape_entities(text)
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
    if not level and own_stamp is None:
        # No engine prefix, or process tags alone: look further in (wrappers nest inside tags)
        inner = _embedded(message)  # serving traffic too: a record behind a tag (`srun: (...`)
        if inner is None and peel is not None and not is_routine(message):
            inner = peel(message)  # the bulk (NCCL INFO, access lines) teaches no wrapper
        elif inner is not None and saw is not None:
            saw(message[: len(message) - len(inner)])
        if inner is not None and inner is not message:
            inside = parse_line(inner)  # a known wrapper inside a learned one (`srun: │ ...`)
            text = text[: len(text) - len(message)] + inside.text
            message, own_stamp, level = inside.message, inside.stamp, inside.level
            ranks = inside.ranks or ranks
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
        if (
            tries == 3
            or "Traceback" in text[: match.start()]
            or _TRAILING.match(text, match.start())
        ):
            return None  # a stamp after its message (_STAMP_AFTER) starts no record
        inner = text[match.start() :]
        if _engine_prefix(inner)[0] is not inner:
            return inner
    return None


def split_records(text: str) -> list[str]:
    """A flattened line cut into its records; a line of one record comes back whole."""
    if "\\n" in text:
        lines = json_dumped(text, _has_record, _plain_piece)
        if lines is not None:
            return lines
    starts = []
    last_end = -2
    for match in _RECORD.finditer(text):
        if match.start() > last_end + 1:  # a process tag and its level stamp are one record
            starts.append(match.start())
        last_end = match.end()
    if len(starts) < 2:
        # a record's message may hold a traceback as text (a prompt logged): not glued lines
        return (None if starts and starts[0] < _LOOK else glued_traceback(text)) or [text]
    bounds = [0, *starts] if starts[0] else starts
    ends = [*bounds[1:], len(text)]
    return [text[a:b] for a, b in zip(bounds, ends) if text[a:b].strip()]  # noqa: B905 (3.8)


def _has_record(piece: str) -> bool:
    return _RECORD.search(piece, 0, _LOOK) is not None


def _plain_piece(piece: str) -> bool:
    return engine_says(parse_line(piece).message.lstrip())


def _wrapper_stamp(match: re.Match[str]) -> RawStamp | None:
    if match.group("docker"):
        return iso_stamp(match.group("docker"))
    if match.group("viewer"):
        return iso_stamp(match.group("viewer").replace(" ", "T"))
    if match.group("jiso"):
        return iso_stamp(match.group("jiso"))
    if match.group("jmon"):
        month = _MONTHS.get(match.group("jmon")[:3].capitalize())
        if month is None:  # a locale's month name (`авг`): the engine's own stamp tells
            return None
        return (None, month, int(match.group("jday")), *hms(match.group("jtime")), 0)
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
            stamp = stamp_of(match.group("date"), match.group("time"), match.group("frac"))
            ranks = match.group("ranks").strip() or ranks
            text = text[match.end() :]
        if text[:1] == "[" and (match is None or not match.group("ranks")):
            text, inner = _inner_tag(text, stamped=match is not None)
            ranks = inner or ranks
        head = text[:1]
    elif head.isdigit():
        match = _THIRD_PARTY.match(text)
        if match:
            stamp = stamp_of(match.group("date"), match.group("time"), match.group("frac"))
            return text[match.end() :], stamp, ranks, match.group("level")
    if head in _LEVEL_STARTS:
        match = _VLLM_LEVEL.match(text)
        if match:
            level = match.group("level")
            stamp = month_day_stamp(match.group("md"), match.group("time"), match.group("frac"))
            text = text[match.end() :]
        elif (after := _STAMP_AFTER.match(text)) is not None:
            stamp = stamp_of(after.group("date"), after.group("time"), after.group("frac"))
            return after.group("message"), stamp, ranks, after.group("level")
        uvicorn = _UVICORN_LEVEL.match(text) if text[:1] in _LEVEL_STARTS else None
        if uvicorn:
            level = level or uvicorn.group("level")
            text = text[uvicorn.end() :]
    elif (head.islower() or head.isdigit() or head == "_") and (tail := _TAIL.match(text)):
        text = text[tail.end() :]
    return text, stamp, ranks, level


def _inner_tag(text: str, *, stamped: bool) -> tuple[str, str]:
    """The text after SGLang's own `[stamp TP0] ` inside a collector's bare `[stamp] `, or
    after SGLang 0.1.x's rank tag (`[rank=1] `, `[gpu_id=1] `: model_runner.py), and its ranks."""
    match = (_SGLANG.match(text) if stamped else None) or _OLD_RANK.match(text)
    if match is None:
        return text, ""
    return text[match.end() :], match.group("ranks").strip()
