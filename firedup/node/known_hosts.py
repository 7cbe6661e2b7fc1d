"""known_hosts read and judged like OpenSSH does, written only by appending one line.

Pure apart from `read_entries` and `append_key`. paramiko's own reader drops what it cannot
parse (or raises on `@cert-authority` / `@revoked` lines) and `save_host_keys` rewrites the
whole file; here every line is kept as written: hashed names, `host,ip` lists, wildcards and
negations match as in sshd(8)'s "SSH_KNOWN_HOSTS FILE FORMAT", `@revoked` keys are refused,
and lines that cannot vouch for a key here (`@cert-authority`, key types paramiko cannot
negotiate) are reported as skipped, never an error.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# Host key types paramiko can negotiate (what a server can prove it holds, to us).
USABLE_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
    }
)


class Verdict(StrEnum):
    KNOWN = "known"
    UNKNOWN = "unknown"
    CHANGED = "changed"
    REVOKED = "revoked"


@dataclass(frozen=True)
class Entry:
    """One key line of a known_hosts file."""

    line_no: int
    marker: str  # "" | "@revoked" | "@cert-authority"
    patterns: tuple[str, ...]
    key_type: str
    key_b64: str

    @property
    def usable(self) -> bool:
        return self.marker == "" and self.key_type in USABLE_TYPES


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    expected: tuple[Entry, ...] = ()  # the known keys of the same type (when CHANGED)
    skipped: tuple[Entry, ...] = ()  # lines for this host that could not vouch here


def lookup_name(host: str, port: int) -> str:
    """The name a key is filed under: `host` on port 22, `[host]:port` elsewhere."""
    return host if port == 22 else f"[{host}]:{port}"


def parse(text: str) -> list[Entry]:
    """Every key line; comments, blank and malformed lines are left alone (never an error)."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else ""
        if len(fields) < 3:
            continue
        entries.append(Entry(number, marker, tuple(fields[0].split(",")), fields[1], fields[2]))
    return entries


def read_entries(path: Path) -> list[Entry]:
    try:
        return parse(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return []


def _wildcard(pattern: str, name: str) -> bool:
    regex = "".join(
        ".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern.lower()
    )
    return re.fullmatch(regex, name.lower()) is not None


def _hashed(pattern: str, name: str) -> bool:
    parts = pattern.split("|")  # |1|salt|hash
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    mine = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return hmac.compare_digest(mine, digest)


def matches(entry: Entry, name: str) -> bool:
    """sshd(8): a negated pattern that matches rules the line out; else any pattern matching."""
    hit = False
    for pattern in entry.patterns:
        negated = pattern.startswith("!")
        bare = pattern[1:] if negated else pattern
        found = _hashed(bare, name) if bare.startswith("|") else _wildcard(bare, name)
        if found and negated:
            return False
        hit = hit or found
    return hit


def judge(entries: list[Entry], name: str, key_type: str, key_b64: str) -> Judgement:
    """What OpenSSH would say of the key `name` presented, given these lines."""
    mine = [e for e in entries if matches(e, name)]
    skipped = tuple(e for e in mine if not e.usable and e.marker != "@revoked")
    if any(e.marker == "@revoked" and e.key_b64 == key_b64 for e in mine):
        return Judgement(Verdict.REVOKED, skipped=skipped)
    plain = [e for e in mine if e.marker == ""]
    if any(e.key_type == key_type and e.key_b64 == key_b64 for e in plain):
        return Judgement(Verdict.KNOWN)
    same_type = tuple(e for e in plain if e.key_type == key_type)
    if same_type:
        return Judgement(Verdict.CHANGED, expected=same_type, skipped=skipped)
    return Judgement(Verdict.UNKNOWN, skipped=skipped)


def known_types(entries: list[Entry], name: str) -> dict[str, str]:
    """Usable, unrevoked keys filed for `name`, one per type (first wins), for negotiation:
    the server is asked for a type we can check, as OpenSSH orders HostKeyAlgorithms."""
    revoked = {e.key_b64 for e in entries if e.marker == "@revoked" and matches(e, name)}
    found: dict[str, str] = {}
    for e in entries:
        if e.usable and e.key_b64 not in revoked and matches(e, name):
            found.setdefault(e.key_type, e.key_b64)
    return found


def fingerprint(key_b64: str) -> str:
    """SHA256 fingerprint exactly as `ssh-keygen -lf` prints it."""
    try:
        blob = base64.b64decode(key_b64)
    except (binascii.Error, ValueError):
        return "SHA256:?"
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def keyscan_command(host: str, port: int) -> str:
    return f"ssh-keyscan -p {port} {host}"


def hashed_name(name: str, salt: bytes | None = None) -> str:
    """`|1|salt|hash`, as OpenSSH writes a name under HashKnownHosts yes."""
    salt = salt if salt is not None else os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def append_key(path: Path, name: str, key_type: str, key_b64: str, *, hashed: bool = False) -> bool:
    """Append one `name type key` line, as OpenSSH's accept-new does (the name hashed under
    HashKnownHosts yes); every existing byte stays. Returns False when another process filed
    the same key meanwhile (nothing written).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # two hosts trusted at once: one line each, whole
        fh.seek(0)
        text = fh.read().decode("utf-8", "replace")
        if judge(parse(text), name, key_type, key_b64).verdict is Verdict.KNOWN:
            return False
        lead = "\n" if text and not text.endswith("\n") else ""
        filed = hashed_name(name) if hashed else name
        fh.write(f"{lead}{filed} {key_type} {key_b64}\n".encode())
    return True
