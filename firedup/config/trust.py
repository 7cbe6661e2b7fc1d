"""Which files firedup may act on without being told: an inventory it found by itself, and the
ssh_config and secret files an inventory names, must be the operator's own, as git trusts a
repository (`safe.directory`).

A file is trusted when nobody but you (or root) could have written it or put it there: it is
owned by you or root and writable by its owner only, and every directory above it is either
writable by its owner only, or sticky (like /tmp) with the entry below it owned by you or root
(a sticky directory keeps others from renaming or replacing what is not theirs). Anything else
is refused before it is read, with a message that says how to trust it: name it explicitly
(`--inventory`, $FIREDUP_INVENTORY, `fab -S`), or list its directory in
$XDG_CONFIG_HOME/firedup/safe-directories or $FIREDUP_SAFE_DIRECTORY (`*` trusts every
directory). docs/security.md, "What an inventory is trusted with".
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path

from firedup.errors import InventoryError

SAFE_ENV = "FIREDUP_SAFE_DIRECTORY"
SAFE_FILE = "safe-directories"
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _trusted_owner(uid: int, me: int) -> bool:
    return uid in (me, 0)


def distrust(path: Path, *, me: int | None = None) -> str | None:
    """Why `path` may have been written or placed by someone else; None when it is yours."""
    me = os.geteuid() if me is None else me
    path = Path(os.path.abspath(path))
    info = path.stat()
    if not _trusted_owner(info.st_uid, me):
        return f"it belongs to {_owner(info.st_uid)}, not to {_owner(me)}"
    if info.st_mode & _OTHERS_WRITE:
        return f"others may write to it (mode {stat.S_IMODE(info.st_mode):04o})"
    child_uid = info.st_uid
    for directory in path.parents:
        dinfo = directory.stat()
        mode = stat.S_IMODE(dinfo.st_mode)
        if not _trusted_owner(dinfo.st_uid, me):
            return f"{directory} belongs to {_owner(dinfo.st_uid)}"
        if mode & _OTHERS_WRITE and not (mode & stat.S_ISVTX and _trusted_owner(child_uid, me)):
            return f"others may write to {directory} (mode {mode:04o}) and replace it"
        child_uid = dinfo.st_uid
    return None


def safe_directories(env: Mapping[str, str], config_dir: Path) -> list[str]:
    """Directories the operator said to trust: $FIREDUP_SAFE_DIRECTORY (os.pathsep-separated)
    and the lines of <config dir>/safe-directories (`#` comments); `*` means every one."""
    listed = [p for p in env.get(SAFE_ENV, "").split(os.pathsep) if p.strip()]
    try:
        lines = (config_dir / SAFE_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    listed += [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    return listed


def _listed(path: Path, safe: list[str]) -> bool:
    where = Path(os.path.abspath(path)).parent
    for entry in safe:
        if entry == "*" or Path(os.path.abspath(os.path.expanduser(entry))) == where:
            return True
    return False


def require_trusted(
    path: Path, what: str, *, env: Mapping[str, str], config_dir: Path, how: str
) -> None:
    """Raise InventoryError unless `path` is trusted or listed as safe; `how` says the
    explicit way to name it (e.g. `--inventory PATH`)."""
    try:
        reason = distrust(path)
    except OSError:
        return  # missing or unreadable: the reader says so, naming the file
    if reason is None or _listed(path, safe_directories(env, config_dir)):
        return
    where = Path(os.path.abspath(path)).parent
    raise InventoryError(
        f"refusing {what} {path}: {reason}; a file others can write or plant could run "
        "commands as you (an ssh_config's ProxyCommand or Match exec)",
        hint=f"if you trust it, {how}, or add {where} to {config_dir / SAFE_FILE} "
        f"(or {SAFE_ENV}={where}); see docs/security.md",
    )
