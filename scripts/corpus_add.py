"""Add logs from public bug reports to the field corpus (tests/fixtures/corpus/).

Reads a batch from stdin: records separated by a header line
`=== <name> | <source url> | <engine> | <verdict> | <phase> | <reason or -> | <wrappers, comma>`
followed by the log text exactly as pasted in the thread. Writes `<name>.log` and a
`<name>.json` sidecar (source, labels, wrappers) into dev/ or test/. The part is decided by
the thread (the url without its #fragment), never by the log, so every log of one thread lands
on the same side; about 40% of threads go to test.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "corpus"
TEST_SHARE = 40  # percent of threads measured only


def part_of(url: str) -> str:
    thread = url.split("#", 1)[0].rstrip("/")
    bucket = int(hashlib.sha256(thread.encode()).hexdigest(), 16) % 100
    return "test" if bucket < TEST_SHARE else "dev"


def write(header: str, body: str) -> Path:
    fields = [field.strip() for field in header[3:].split("|")]
    name, url, engine, verdict, phase, reason, wrappers = (fields + [""] * 7)[:7]
    part = CORPUS / part_of(url)
    part.mkdir(parents=True, exist_ok=True)
    log = part / f"{name}.log"
    if log.exists() or (CORPUS / ("dev" if part.name == "test" else "test") / log.name).exists():
        raise SystemExit(f"{name}: already in the corpus")
    log.write_text(body.strip("\n") + "\n")
    sidecar = {
        "source": url,
        "engine": engine,
        "verdict": verdict,
        "phase": phase,
        "reason": None if reason in ("", "-") else reason,
        "wrappers": [w for w in wrappers.split(",") if w.strip()],
    }
    (part / f"{name}.json").write_text(json.dumps(sidecar, indent=1) + "\n")
    return log


def main() -> None:
    header, lines = None, []
    for raw in sys.stdin.read().splitlines():
        if raw.startswith("=== "):
            if header:
                print(write(header, "\n".join(lines)))
            header, lines = raw, []
        else:
            lines.append(raw)
    if header:
        print(write(header, "\n".join(lines)))


if __name__ == "__main__":
    main()
