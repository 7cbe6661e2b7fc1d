"""Host key checking for every hop (the node and each ProxyJump bastion), like OpenSSH.

The known_hosts file is read by firedup.node.known_hosts, never by paramiko (whose reader
raises on marker lines and whose save rewrites the file). paramiko is handed only this hop's
usable keys, so it asks the server for a key type we can check (as OpenSSH orders
HostKeyAlgorithms) and compares it; a key of a type we hold nothing for comes to `Policy`,
which judges it on the whole file: known, revoked, unknown (refused under `strict`, appended
as one line under `accept-new`). Every refusal names the SHA256 fingerprint as
`ssh-keygen -lf` prints it and the `ssh-keyscan` command to check it against.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import paramiko

from firedup.config.inventory import KeyPolicy
from firedup.errors import ConnectError
from firedup.node import known_hosts as kh

log = logging.getLogger("firedup")


def _skipped_note(judgement: kh.Judgement, path: Path) -> str:
    if not judgement.skipped:
        return ""
    lines = ", ".join(f"line {e.line_no} ({e.marker or e.key_type})" for e in judgement.skipped)
    return f"; skipped in {path}: {lines} (not usable by firedup)"


def refusal(
    where: str, host: str, port: int, path: Path, key: paramiko.PKey, judgement: kh.Judgement
) -> ConnectError:
    """The message for a key we will not accept, naming fingerprints and how to check."""
    name = kh.lookup_name(host, port)
    got = f"{key.get_name()} {kh.fingerprint(key.get_base64())}"
    scan = f"{kh.keyscan_command(host, port)} | ssh-keygen -lf -"
    note = _skipped_note(judgement, path)
    if judgement.verdict is kh.Verdict.REVOKED:
        return ConnectError(
            f"{where}: host key REVOKED: it presented {got}, marked @revoked for {name} "
            f"in {path}; refusing to connect (compare with `{scan}`){note}",
            hint="a revoked key is never accepted; the node needs a new host key",
        )
    if judgement.verdict is kh.Verdict.CHANGED:
        expected = ", ".join(
            f"{kh.fingerprint(e.key_b64)} (line {e.line_no})" for e in judgement.expected
        )
        return ConnectError(
            f"{where}: host key CHANGED: it presented {got}; {path} has {expected} "
            f"for {name}; refusing to connect (the node was reinstalled, or someone is in "
            f"the middle; compare with `{scan}`){note}",
            hint=f"check the node's key out of band; if it was reinstalled, remove the old "
            f"entry: ssh-keygen -R '{name}' -f {path}",
        )
    return ConnectError(
        f"{where}: host key unknown: it presented {got}, not in {path} for {name}; "
        f"refusing to connect (compare with `{scan}`){note}",
        hint="check it against the node's own key, then add it "
        f"(`{kh.keyscan_command(host, port)} >> {path}`), or set 'host_key_policy: accept-new' "
        "for this host in the inventory",
    )


class Policy(paramiko.MissingHostKeyPolicy):
    """Judges a key paramiko holds nothing for; raises ConnectError to refuse it."""

    def __init__(
        self,
        where: str,
        host: str,
        port: int,
        path: Path,
        policy: KeyPolicy,
        *,
        hashed: bool = False,  # ssh_config HashKnownHosts: file new names hashed
    ) -> None:
        self.where, self.host, self.port, self.path, self.policy = where, host, port, path, policy
        self.hashed = hashed

    def judge(self, key: paramiko.PKey) -> kh.Judgement:
        name = kh.lookup_name(self.host, self.port)
        return kh.judge(kh.read_entries(self.path), name, key.get_name(), key.get_base64())

    def missing_host_key(self, client: Any, hostname: str, key: paramiko.PKey) -> None:
        judgement = self.judge(key)
        if judgement.verdict is kh.Verdict.KNOWN:
            return
        if judgement.verdict is kh.Verdict.UNKNOWN and self.policy is KeyPolicy.ACCEPT_NEW:
            name = kh.lookup_name(self.host, self.port)
            self._record(name, key)
            log.warning(
                "%s: new host key %s %s recorded for %s in %s%s",
                self.where,
                key.get_name(),
                kh.fingerprint(key.get_base64()),
                name,
                self.path,
                _skipped_note(judgement, self.path),
            )
            return
        raise self.refusal(key, judgement)

    def _record(self, name: str, key: paramiko.PKey) -> None:
        """accept-new: file the key, or refuse naming why it could not be (not "cannot
        connect": the node was reached, this machine's file is the trouble)."""
        try:
            kh.append_key(self.path, name, key.get_name(), key.get_base64(), hashed=self.hashed)
        except OSError as exc:
            raise ConnectError(
                f"{self.where}: cannot record the node's new host key in {self.path}: "
                f"{exc.strerror or exc}; not connecting to a key that is not recorded",
                hint=f"free space or make {self.path} writable, or check and add the key "
                f"yourself: ssh-keyscan -p {self.port} {self.host} "
                f"(fingerprint {kh.fingerprint(key.get_base64())})",
            ) from None

    def refusal(self, key: paramiko.PKey, judgement: kh.Judgement) -> ConnectError:
        return refusal(self.where, self.host, self.port, self.path, key, judgement)


def prepare(client: paramiko.SSHClient, policy: Policy) -> None:
    """Give paramiko this hop's usable keys (one per type) and our policy for the rest."""
    keys = client.get_host_keys()
    keys.clear()
    name = kh.lookup_name(policy.host, policy.port)
    for key_type, b64 in kh.known_types(kh.read_entries(policy.path), name).items():
        try:
            key = paramiko.PKey.from_type_string(key_type, base64.b64decode(b64))
            keys.add(name, key_type, key)
        except (paramiko.SSHException, ValueError, TypeError):
            continue  # a line paramiko cannot read cannot vouch: Policy sees the key instead
    client.set_missing_host_key_policy(policy)
