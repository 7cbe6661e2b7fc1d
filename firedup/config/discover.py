"""Which inventory file to use, when none is named: the lookup order users rely on.

Order: an explicit path (--inventory, or `firedup.inventory` in fabric.yaml) >
$FIREDUP_INVENTORY > `inventory/hosts.yaml` or `firedup.yaml` in the current directory or the
nearest parent that has one (like git finds its repository, so it works from anywhere inside
an ops repository) > `hosts.yaml` in the user's config dir ($XDG_CONFIG_HOME/firedup, by
default ~/.config/firedup). docs/inventory.md describes it for users.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

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
    for directory in (start, *start.parents):
        for name in LOCAL_NAMES:
            if (directory / name).is_file():
                return directory / name
    user = user_config_dir(env) / USER_FILE
    if user.is_file():
        return user
    raise InventoryError(
        "no inventory found: looked for --inventory, $FIREDUP_INVENTORY, "
        f"{' or '.join(str(n) for n in LOCAL_NAMES)} in {start} and its parents, and {user}"
    )
