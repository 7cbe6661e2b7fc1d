"""Which inventory file to use, when none is named: the lookup order users rely on.

Order: an explicit path (--inventory, or `firedup.inventory` in fabric.yaml) >
$FIREDUP_INVENTORY > `inventory/hosts.yaml` or `firedup.yaml` in the current directory or the
nearest parent that has one (like git finds its repository, so it works from anywhere inside
an ops repository) > `hosts.yaml` in the user's config dir ($XDG_CONFIG_HOME/firedup, by
default ~/.config/firedup). docs/inventory.md describes it for users.

The parent walk stops at $HOME and at a filesystem boundary (as git's does), and a file found
by the walk or in the config dir is used only when it is trusted (firedup/config/trust.py):
one another account owns, or could have put there, is refused with how to trust it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from firedup.config.trust import require_trusted
from firedup.errors import InventoryError

INVENTORY_ENV = "FIREDUP_INVENTORY"
# Per directory, in this order: the repository layout, then a single-file setup.
LOCAL_NAMES = (Path("inventory") / "hosts.yaml", Path("firedup.yaml"))
USER_FILE = "hosts.yaml"


def user_config_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base).expanduser() / "firedup"


def find_inventory(
    explicit: str | Path | None = None,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The inventory file to load; InventoryError naming every place looked when none is found."""
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit).expanduser()
    if env.get(INVENTORY_ENV):
        return Path(env[INVENTORY_ENV]).expanduser()
    start = (cwd or Path.cwd()).resolve()
    for directory in search_dirs(start, env):
        for name in LOCAL_NAMES:
            if (directory / name).is_file():
                return _trusted(directory / name, env)
    user = user_config_dir(env) / USER_FILE
    if user.is_file():
        return _trusted(user, env)
    raise InventoryError(
        "no inventory found: looked for --inventory, $FIREDUP_INVENTORY, "
        f"{' or '.join(str(n) for n in LOCAL_NAMES)} in {start} and its parents, and {user}"
    )


def search_dirs(start: Path, env: Mapping[str, str]) -> list[Path]:
    """`start` and its parents, up to $HOME (included) or the last one on `start`'s
    filesystem, whichever comes first."""
    home = Path(env.get("HOME") or Path.home()).resolve()
    found = [start]
    try:
        device = start.stat().st_dev
    except OSError:
        return found
    for directory in start.parents:
        if found[-1] == home:
            break
        try:
            if directory.stat().st_dev != device:
                break
        except OSError:
            break
        found.append(directory)
    return found


def _trusted(path: Path, env: Mapping[str, str]) -> Path:
    how = f"name it: --inventory {path} (or {INVENTORY_ENV}={path})"
    require_trusted(path, "the inventory", env=env, config_dir=user_config_dir(env), how=how)
    return path


def trust_named(named: list[tuple[Path, str]], env: Mapping[str, str] | None = None) -> None:
    """The files an inventory names that could make firedup run or ship what they say (an
    ssh_config, a secret file): refused unless trusted, like the inventory itself."""
    env = os.environ if env is None else env
    for path, key in named:
        how = "make it yours and writable by you alone"
        require_trusted(path.expanduser(), key, env=env, config_dir=user_config_dir(env), how=how)
