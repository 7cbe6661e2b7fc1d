"""Pure parts of the SSH transport: known_hosts matching and judging, fingerprints as
ssh-keygen prints them, ssh_config resolution with Include and inventory precedence, and the
framing that separates a login shell's banner from a command's output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.node import known_hosts as kh
from firedup.node.framing import (
    StreamUnframer,
    framed_command,
    is_posix_shell,
    new_marker,
    unframe,
)
from firedup.node.ssh_config import parse_jump, resolve


def keypair(tmp: Path, name: str, kind: str = "ed25519") -> tuple[str, str]:
    key = tmp / name
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(key)], check=True)
    kind_, b64 = key.with_suffix(".pub").read_text().split()[:2]
    return kind_, b64


def test_hashed_negated_wildcard_and_marker_lines(tmp_path: Path) -> None:
    t, a = keypair(tmp_path, "a")
    _, b = keypair(tmp_path, "b")
    hashed = tmp_path / "kh"
    hashed.write_text(f"[10.0.0.7]:2222 {t} {a}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(hashed)], check=True, capture_output=True)
    text = (
        "# comment\n"
        + hashed.read_text()
        + f"host1,10.0.0.5 {t} {a}\n"
        + f"*.lab,!bad.lab {t} {a}\n"
        + f"@cert-authority *.lab {t} {b}\n"
        + f"@revoked gone.lab {t} {a}\n"
        + "garbage\n"
    )
    entries = kh.parse(text)
    assert kh.judge(entries, "[10.0.0.7]:2222", t, a).verdict is kh.Verdict.KNOWN
    assert kh.judge(entries, "10.0.0.5", t, a).verdict is kh.Verdict.KNOWN
    assert kh.judge(entries, "node.lab", t, a).verdict is kh.Verdict.KNOWN
    assert kh.judge(entries, "bad.lab", t, a).verdict is kh.Verdict.UNKNOWN
    changed = kh.judge(entries, "host1", t, b)
    assert changed.verdict is kh.Verdict.CHANGED and changed.expected[0].line_no == 3
    assert kh.judge(entries, "gone.lab", t, a).verdict is kh.Verdict.REVOKED
    skipped = kh.judge(entries, "x.lab", t, b)
    assert [e.marker for e in skipped.skipped] == ["@cert-authority"]
    assert kh.known_types(entries, "gone.lab") == {}  # revoked keys never vouch


@pytest.mark.parametrize("kind", ["ed25519", "ecdsa", "rsa"])
def test_fingerprint_is_what_ssh_keygen_prints(tmp_path: Path, kind: str) -> None:
    _, b64 = keypair(tmp_path, kind, kind)
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / f"{kind}.pub")], capture_output=True, text=True
    ).stdout.split()[1]
    assert kh.fingerprint(b64) == printed


def test_append_keeps_every_byte(tmp_path: Path) -> None:
    t, a = keypair(tmp_path, "a")
    path = tmp_path / "known_hosts"
    before = f"# mine\n@revoked * {t} AAAA\nh1,10.0.0.1 {t} {a} laptop"
    path.write_text(before)
    assert kh.append_key(path, "[n]:2200", t, a)
    assert path.read_text() == before + f"\n[n]:2200 {t} {a}\n"
    assert not kh.append_key(path, "[n]:2200", t, a)  # already there: nothing written
    assert kh.append_key(path, "other", t, a, hashed=True)
    last = path.read_text().splitlines()[-1]
    assert last.startswith("|1|") and "other" not in last
    assert kh.judge(kh.parse(last), "other", t, a).verdict is kh.Verdict.KNOWN


def test_ssh_config_include_and_written_values_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    ssh = tmp_path / ".ssh"
    (ssh / "conf.d").mkdir(parents=True)
    (ssh / "conf.d" / "gpu.conf").write_text(
        "Host gpu\n  HostName 10.1.2.3\n  Port 2202\n  User ops\n  IdentityFile ~/.ssh/id_gpu\n"
        "  ProxyJump admin@bastion:2022\n  ConnectTimeout 7\nHost other\n  Port 1\n"
    )
    (ssh / "config").write_text(
        "Host gpu\n  Include conf.d/*.conf\n  User late\nHost *\n  Port 9\n"
    )
    data = {
        "hosts": {
            "a": {"address": "gpu", "workdir": "/w", "deployment": "d"},
            "b": {"address": "gpu", "workdir": "/w", "deployment": "d", "port": 22, "user": "me"},
        },
        "deployments": {"d": {"engine": "sglang", "model": "/m"}},
    }
    inv = parse_inventory(data, tmp_path / "hosts.yaml")
    a = resolve(inv.hosts["a"])
    assert (a.target.host, a.target.port, a.target.user) == ("10.1.2.3", 2202, "ops")
    assert a.target.identity_files == (ssh / "id_gpu",)
    assert a.target.connect_timeout_s == 7
    assert [(j.user, j.host, j.port) for j in a.jumps] == [("admin", "bastion", 2022)]
    b = resolve(inv.hosts["b"])  # written in the inventory: wins, even when it is the default
    assert (b.target.port, b.target.user) == (22, "me")
    assert inv.hosts["a"].known_hosts == ssh / "known_hosts"  # the default, expanded


def test_parse_jump_forms() -> None:
    assert parse_jump("bastion") == (None, "bastion", None)
    assert parse_jump("u@[::1]:22") == ("u", "::1", 22)


def test_framing_drops_banner_and_keeps_bytes() -> None:
    marker = new_marker()
    assert marker in framed_command(["true"], marker)
    assert framed_command(["a b"], marker, posix_shell=True).endswith(f"{marker} 'a b'")
    raw = b"Welcome (no newline)" + marker.encode() + b" /usr/bin/fish\n\x00data\r\n"
    found = unframe(raw, marker)
    assert found.framed and found.data == b"\x00data\r\n" and found.prelude.startswith(b"Wel")
    assert found.shell == "/usr/bin/fish" and not is_posix_shell(found.shell)
    assert is_posix_shell("/bin/bash") and is_posix_shell("/usr/bin/zsh")
    assert not unframe(b"banner only\n", marker).framed
    stream = StreamUnframer(marker)
    pieces = [raw[i : i + 3] for i in range(0, len(raw), 3)]
    assert b"".join(stream.feed(p) for p in pieces) == b"\x00data\r\n"


def test_fab_dash_s_file_is_read_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fab -S FILE` (Fabric's runtime ssh path) replaces ~/.ssh/config, like `ssh -F`; the
    connections are built from it, with nothing left for Fabric to resolve again."""
    from fabric import Config

    from firedup.node.ssh_connect import build

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host gpu\n  Port 1111\n")
    chosen = tmp_path / "fleet.conf"
    chosen.write_text("Host gpu\n  HostName 10.9.8.7\n  Port 2202\n  User ops\n  ProxyJump b\n")
    data = {
        "hosts": {"n": {"address": "gpu", "workdir": "/w", "deployment": "d"}},
        "deployments": {"d": {"engine": "sglang", "model": "/m"}},
    }
    spec = parse_inventory(data, tmp_path / "hosts.yaml").hosts["n"]
    chain = build(spec, Config(runtime_ssh_path=str(chosen)))
    bastion, target = chain
    assert (target.host, target.port, target.user) == ("10.9.8.7", 2202, "ops")
    assert target.gateway is bastion and bastion.host == "b" and bastion.gateway is False
    assert "via bastion b" in bastion.hop.where


def test_missing_identity_file_is_named_before_connecting(tmp_path: Path) -> None:
    from firedup.errors import ConnectError
    from firedup.node.ssh import SshNode

    key = tmp_path / "nope"
    data = {
        "hosts": {
            "n": {
                "address": "127.0.0.1",
                "port": 9,  # discard: nothing would answer anyway
                "identity_file": str(key),
                "ssh_config": "/dev/null",
                "workdir": "/w",
                "deployment": "d",
            }
        },
        "deployments": {"d": {"engine": "sglang", "model": "/m"}},
    }
    node = SshNode(parse_inventory(data, tmp_path / "hosts.yaml").hosts["n"])
    with pytest.raises(ConnectError, match=f"identity_file {key} does not exist"):
        node.run(["true"])
