"""Label-preserving transforms of a log: what collecting, pasting and terminals do to it.

Each transform takes a log's bytes and gives bytes a human would label the same way: every
line wrapped by a collector (journalctl, kubectl, docker compose, Ray, TorchServe, Slurm,
torch elastic, a TUI border; several nested), long lines hard-wrapped as a paste does,
CRLF, colour, tabs, trailing spaces, unrelated noise lines, the head of the log cut off.
None is keyed to a log: they act on lines, never on what the lines say, except that noise
goes between records, not inside a traceback (a process writes its traceback in one go).

Pure and deterministic: the same bytes in give the same bytes out (numbers in prefixes come
from the line's index). tests/unit/test_logscan_metamorphic.py runs them on labelled logs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

Transform = Callable[[bytes], bytes]


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _join(lines: Sequence[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def per_line(make: Callable[[int], str]) -> Transform:
    """Every line gets `make(index)` in front of it, as a collector adds its tag."""

    def apply(data: bytes) -> bytes:
        return _join([make(i) + line for i, line in enumerate(_lines(data))])

    return apply


def nested(*transforms: Transform) -> Transform:
    """The transforms applied in order: the first is the innermost."""

    def apply(data: bytes) -> bytes:
        for transform in transforms:
            data = transform(data)
        return data

    return apply


def _clock(i: int) -> tuple[int, int, int]:
    second = i // 3
    return 10 + second // 3600, second // 60 % 60, second % 60


def journal(i: int) -> str:
    hour, minute, second = _clock(i)
    return f"Dec 01 {hour:02d}:{minute:02d}:{second:02d} gpu-node vllm[1234]: "


def kubectl(i: int) -> str:
    hour, minute, second = _clock(i)
    return f"2024-05-01T{hour:02d}:{minute:02d}:{second:02d}.{i * 7919 % 10**9:09d}Z "


def compose(_: int) -> str:
    return "vllm-1  | "


def ray(i: int) -> str:
    return f"(ServeReplica:default:LLMServer pid={1200 + i % 3}, ip=10.0.0.1) "


def ray_nested(_: int) -> str:
    return "(ServeController pid=1) (ServeReplica:default:LLMServer pid=2) "


def vllm_ray(i: int) -> str:  # vLLM's own names: only for a log already read as vLLM's
    return f"(RayWorkerWrapper pid={1200 + i % 3}, ip=10.0.0.1) "


def vllm_nested(_: int) -> str:
    return "(EngineCore_DP0 pid=1) (Worker_TP0 pid=2) "


def torchserve(i: int) -> str:
    hour, minute, second = _clock(i)
    return (
        f"2024-05-01T{hour:02d}:{minute:02d}:{second:02d},{i * 37 % 1000:03d} [INFO ] "
        "W-9000-model_1.0-stdout MODEL_LOG - "
    )


def srun(_: int) -> str:
    return "srun: "


def srun_label(i: int) -> str:
    return f"{i % 2}: "


def rank(_: int) -> str:
    return "[rank0]: "


def border(data: bytes, width: int = 120) -> bytes:
    """A TUI pane (k9s, a dashboard) around every line: `│ text   │`."""
    return _join([f"│ {line.ljust(width)} │" for line in _lines(data)])


def hard_wrap(width: int) -> Transform:
    """Lines longer than `width` cut every `width` characters, mid-word, as a paste does."""

    def apply(data: bytes) -> bytes:
        out: list[str] = []
        for line in _lines(data):
            if "\r" in line or len(line) <= width:
                out.append(line)  # a redrawn bar is a terminal's, never pasted as one line
                continue
            out.extend(line[at : at + width] for at in range(0, len(line), width))
        return _join(out)

    return apply


def crlf(data: bytes) -> bytes:
    return _join([line.rstrip("\r") + "\r" for line in _lines(data)])


def trailing_spaces(data: bytes) -> bytes:
    return _join([line + " " * (1 + i % 3) for i, line in enumerate(_lines(data))])


def tabs(data: bytes) -> bytes:
    """Leading indentation of four or two spaces written as tabs, as some editors save it."""
    out = []
    for line in _lines(data):
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        out.append("\t" * (indent // 2) + " " * (indent % 2) + body if indent else line)
    return _join(out)


_COLOURS = ("\x1b[32m", "\x1b[1;33m", "\x1b[0;36m", "\x1b[31m")


def ansi(data: bytes) -> bytes:
    """Each line coloured, and its first word in another colour, as a terminal logger does."""
    out = []
    for i, line in enumerate(_lines(data)):
        head, space, rest = line.partition(" ")
        colour = _COLOURS[i % len(_COLOURS)]
        out.append(f"{colour}{head}\x1b[0m{space}\x1b[2m{rest}\x1b[0m" if line else line)
    return _join(out)


NOISE = (
    "WARNING: Running pip as the 'root' user can result in broken permissions and conflicting "
    "behaviour with the system package manager.",
    "user@gpu-node:~/serve$ ",
    "\rUnpacking objects:  40% (2/5)\rUnpacking objects:  80% (4/5)\rUnpacking objects: 100% (5/5)",
    "[notice] A new release of pip is available: 23.0.1 -> 24.0",
    "+ export CUDA_VISIBLE_DEVICES=0,1",
)


def _between_records(line: str, following: str) -> bool:
    """Whether noise may go before `following`: neither is inside a traceback or a wrap."""
    inside = ("Traceback", "File ", "During handling", "The above exception")
    return not (
        following[:1].isspace()
        or line[:1].isspace()
        or following.lstrip().startswith(inside)
        or line.lstrip().startswith(inside)
        or not line.strip()
    )


def noise(every: int = 5) -> Transform:
    """Unrelated lines (pip, a shell prompt, another tool's \\r bar) between records."""

    def apply(data: bytes) -> bytes:
        lines = _lines(data)
        out = [NOISE[1] + "docker logs -f vllm", NOISE[0]]
        count = 0
        for i, line in enumerate(lines):
            out.append(line)
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if following and i % every == every - 1 and _between_records(line, following):
                out.append(NOISE[count % len(NOISE)])
                count += 1
        out.append(NOISE[1])
        return _join(out)

    return apply


def cut_head(lines: int) -> Transform:
    """The first `lines` lines gone: a log pasted from its middle."""

    def apply(data: bytes) -> bytes:
        return _join(_lines(data)[lines:])

    return apply


def line_count(data: bytes) -> int:
    return len(_lines(data))


def line_ends(data: bytes) -> list[int]:
    """The byte offset after each line of `data` as _lines cuts it (for feeding line by line)."""
    ends, at = [], 0
    for line in _lines(data):
        at += len(line.encode()) + 1
        ends.append(min(at, len(data)))
    return ends


# -- the damage pastes show (each transform says where it is seen) ------------------------


def docker_json(data: bytes) -> bytes:
    """docker's json-file driver: what `cat /var/lib/docker/containers/*/*-json.log` shows,
    one JSON record per line, the line's own newline escaped inside it."""
    out = []
    for i, line in enumerate(_lines(data)):
        hour, minute, second = _clock(i)
        stamp = f"2024-05-01T{hour:02d}:{minute:02d}:{second:02d}.{i * 7919 % 10**9:09d}Z"
        out.append(json.dumps({"log": line + "\n", "stream": "stderr", "time": stamp}))
    return _join(out)


def journal_iso(i: int) -> str:  # journalctl -o short-iso (and short-iso-precise, every other)
    hour, minute, second = _clock(i)
    frac = f".{i * 7919 % 10**6:06d}" if i % 2 else ""
    return f"2024-05-01T{hour:02d}:{minute:02d}:{second:02d}{frac}+0000 gpu-node vllm[1234]: "


def journal_precise(i: int) -> str:  # journalctl -o short-precise
    hour, minute, second = _clock(i)
    return f"Dec 01 {hour:02d}:{minute:02d}:{second:02d}.{i * 7919 % 10**6:06d} gpu-node vllm[9]: "


_LOCALE_MONTHS = ("déc.", "Dez", "dic", "дек", "12月")  # fr, de, es, ru; ja is not a word


def journal_locale(i: int) -> str:  # journalctl under LANG=fr_FR (and de, es, ru) month names
    hour, minute, second = _clock(i)
    month = _LOCALE_MONTHS[i // 50 % 4]
    return f"{month} 01 {hour:02d}:{minute:02d}:{second:02d} gpu-node vllm[1234]: "


def kubectl_prefix(i: int) -> str:  # kubectl logs --prefix --timestamps
    return f"[pod/vllm-7d9f8-x2k4q/vllm] {kubectl(i)}"


def elastic_default(_: int) -> str:  # torchrun --tee 3: `[default0]:` with no space after it
    return "[default0]:"


def collector_bracket(_: int) -> str:  # stern, a log collector's `[pod-name] `
    return "[vllm-7d9f8-x2k4q] "


def collector_bar(_: int) -> str:  # a log collector's `pod-name | ` (stern's, a Loki export)
    return "vllm-7d9f8-x2k4q | "


def quote(data: bytes) -> bytes:
    """A GitHub email reply or a Markdown quote: `> ` on every line, `>` on a blank one."""
    return _join([f"> {line}" if line else ">" for line in _lines(data)])


_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}


def html_entities(data: bytes) -> bytes:
    """A log scraped from a web page's text (a forum, a rendered issue) kept its entities."""
    pattern = re.compile("[&<>\"']")
    return _join([pattern.sub(lambda m: _ENTITIES[m.group()], line) for line in _lines(data)])


def json_dumped(every: int = 8) -> Transform:
    """A log dumped as a JSON string (a notebook's output cell, an API's error body): lines
    joined by a literal `\\n`, quotes escaped, several records on one physical line."""

    def apply(data: bytes) -> bytes:
        lines = _lines(data)
        chunks = ["\n".join(lines[at : at + every]) for at in range(0, len(lines), every)]
        return _join([json.dumps(chunk, ensure_ascii=False)[1:-1] for chunk in chunks])

    return apply


_RECORD = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d\d-\d\d) "
    r"(?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? \[?(?P<file>[^\s\]:]+):(?P<no>\d+)\] (?P<msg>.*)"
)


def stamp_after(data: bytes) -> bytes:
    """vLLM's records in LMCache 0.1's format (lmcache_vllm, 2024): `%(levelname)s %(name)s:
    %(message)s [%(asctime)s] -- %(pathname)s:%(lineno)d`, the stamp after the message."""
    out = []
    for line in _lines(data):
        match = _RECORD.fullmatch(line)
        if match is None:
            out.append(line)
            continue
        month, day = match.group("md").split("-")
        stamp = f"[2024-{month}-{day} {match.group('time')},123]"
        path = f"/opt/venv/lib/python3.10/site-packages/vllm/{match.group('file')}"
        out.append(f"{match.group('level')} vllm: {match.group('msg')} {stamp} -- {path}:7")
    return _join(out)


def glued(data: bytes) -> bytes:
    """A whole excerpt glued onto one line: a comment box or a chat that dropped newlines."""
    return _join([" ".join(line.strip() for line in _lines(data) if line.strip())])


def hard_wrap_indented(width: int, indent: str = "  ") -> Transform:
    """A terminal or a viewer wrapping at `width` with the continuation indented inside the
    same width (rich's console, a pager with a hanging indent)."""

    def apply(data: bytes) -> bytes:
        out: list[str] = []
        for line in _lines(data):
            if "\r" in line or len(line) <= width:
                out.append(line)
                continue
            out.append(line[:width])
            step = width - len(indent)
            out.extend(indent + line[at : at + step] for at in range(width, len(line), step))
        return _join(out)

    return apply


_FRAME = re.compile(r'(\s*File ")(/[^"]+)(")')


def windows_paths(data: bytes) -> bytes:
    """A traceback from a Windows install (WSL's host side, a Windows venv): frame paths with
    a drive letter and backslashes."""

    def windows(match: re.Match[str]) -> str:
        return match.group(1) + "C:" + match.group(2).replace("/", "\\") + match.group(3)

    return _join([_FRAME.sub(windows, line, count=1) for line in _lines(data)])


_BAR_LINE = re.compile(r".*\d%(?: Completed)? ?\|")


def cr_bars(data: bytes) -> bytes:
    """A bar's redraws as tqdm writes them to a file: `\\r` between them, one physical line."""
    out: list[str] = []
    for line in _lines(data):
        if out and _BAR_LINE.match(line) and _BAR_LINE.match(out[-1].rsplit("\r", 1)[-1]):
            out[-1] += "\r" + line
        else:
            out.append(line)
    return _join(out)


WRAPPERS: dict[str, Transform] = {
    "journal": per_line(journal),
    "kubectl": per_line(kubectl),
    "compose": per_line(compose),
    "ray": per_line(ray),
    "ray_nested": per_line(ray_nested),
    "torchserve": per_line(torchserve),
    "srun": per_line(srun),
    "srun_label": per_line(srun_label),
    "rank": per_line(rank),
    "border": border,
    "journal+compose": nested(per_line(compose), per_line(journal)),
    "kubectl+ray": nested(per_line(ray), per_line(kubectl)),
    "compose+torchserve": nested(per_line(torchserve), per_line(compose)),
    "srun+rank": nested(per_line(rank), per_line(srun_label)),
    "border+kubectl": nested(per_line(kubectl), border),
    "docker_json": docker_json,
    "journal_iso": per_line(journal_iso),
    "journal_precise": per_line(journal_precise),
    "journal_locale": per_line(journal_locale),
    "kubectl_prefix": per_line(kubectl_prefix),
    "elastic_default": per_line(elastic_default),
    "collector_bracket": per_line(collector_bracket),
    "collector_bar": per_line(collector_bar),
    "quote": quote,
    "quote+compose": nested(per_line(compose), quote),
}

VLLM_WRAPPERS: dict[str, Transform] = {
    "vllm_ray": per_line(vllm_ray),
    "vllm_nested": per_line(vllm_nested),
    "kubectl+vllm_nested": nested(per_line(vllm_nested), per_line(kubectl)),
}

TEXT: dict[str, Transform] = {
    "wrap80": hard_wrap(80),
    "wrap100": hard_wrap(100),
    "wrap120": hard_wrap(120),
    "crlf": crlf,
    "ansi": ansi,
    "tabs": tabs,
    "trailing": trailing_spaces,
    "noise": noise(),
    "compose+wrap100": nested(per_line(compose), hard_wrap(100)),
    "crlf+ansi+journal": nested(ansi, per_line(journal), crlf),
    "html_entities": html_entities,
    "json_dumped": json_dumped(),
    "stamp_after": stamp_after,
    "glued": glued,
    "wrap80_indented": hard_wrap_indented(80),
    "windows_paths": windows_paths,
    "cr_bars": cr_bars,
}
