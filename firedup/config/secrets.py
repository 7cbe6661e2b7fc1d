"""Secrets: values that reach the server's environment and nothing else.

A deployment names its secrets and where the operator's machine holds them (an env var or a
local file); the inventory never holds a value. Values are resolved on the operator's side,
written on the node to `<rundir>/secrets.env` (mode 0600, before any byte is written), sourced
by the launch script and deleted by it. Everything that prints (plans, errors, records, what
the node sends back) passes through `mask`, which replaces every value resolved or learned
(`learn_secrets`) in this process with `***`. See docs/security.md.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import threading
from collections.abc import Mapping
from urllib.parse import quote, quote_plus

from firedup.config.deployment import Deployment, SecretSource
from firedup.errors import DeployError

MASK = "***"
SECRETS_FILE = "secrets.env"

_lock = threading.Lock()
_known: set[str] = set()


class SecretError(DeployError):
    """A secret the deployment names cannot be found on the operator's machine."""

    exit_code = 2


def _remember(value: str) -> None:
    # Very short values would mask ordinary words all over the output; they are still kept
    # out of scripts and plans, which never contain values at all.
    if len(value) >= 4:
        with _lock:
            _known.update(encoded_forms(value))


def encoded_forms(value: str) -> set[str]:
    """`value` as an engine or a client may print it: as is, URL-encoded (a `?token=`),
    JSON-escaped (a logged request body), and base64 (an Authorization header), also inside a
    longer base64 text (only the characters that depend on the value alone)."""
    raw = value.encode()
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value)}
    forms |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    for offset, head in ((0, 0), (1, 2), (2, 3)):  # the value's first byte at any alignment
        partial = (offset + len(raw)) % 3 != 0  # the last character also holds what follows
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * offset + raw).decode().rstrip("=")
            core = text[head : len(text) - partial]
            if len(core) >= 8:
                forms.add(core)
    return {form for form in forms if len(form) >= 4}


def _read(deployment: Deployment, name: str, source: SecretSource) -> str:
    if source.env is not None:
        if source.env not in os.environ:
            raise SecretError(
                f"deployment {deployment.name}: secret {name} comes from the environment "
                f"variable {source.env}, which is not set here",
                hint=f"export {source.env}=... before running fab",
            )
        return os.environ[source.env]
    assert source.file is not None
    path = source.file.expanduser()
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise SecretError(
            f"deployment {deployment.name}: secret {name} comes from {path}: {reason}"
        ) from None


def resolve_secrets(deployment: Deployment) -> dict[str, str]:
    """Read each secret from where the operator's machine holds it; remember it for masking."""
    values: dict[str, str] = {}
    for name, source in deployment.secrets.items():
        values[name] = _read(deployment, name, source)
        _remember(values[name])
    return values


def learn_secrets(deployment: Deployment) -> None:
    """Remember, for masking, every secret of `deployment` this machine can resolve.

    For the commands that print what the node holds (logs, wait, status, history): an engine
    may log a token, and masking must not depend on this process having deployed. A secret
    that cannot be resolved here is skipped: reading a log must not need it.
    """
    for name, source in deployment.secrets.items():
        try:
            _remember(_read(deployment, name, source))
        except SecretError:
            continue


def secrets_env_text(values: Mapping[str, str]) -> str:
    """The 0600 file the launch script sources (with `set -a`): NAME=quoted-value lines."""
    return "".join(f"{name}={shlex.quote(value)}\n" for name, value in sorted(values.items()))


def mask(text: str) -> str:
    """Replace every secret value resolved in this process with ***."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        text = text.replace(value, MASK)
    return text


def masked_env(env: Mapping[str, str], secret_names: set[str] | frozenset[str]) -> dict[str, str]:
    """An env mapping fit for printing: secret names shown, their values never."""
    return {k: MASK if k in secret_names else mask(v) for k, v in env.items()}
