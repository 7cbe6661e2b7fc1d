"""Inventory discovery: the documented order, on real directories (docs/inventory.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from firedup.config.discover import find_inventory
from firedup.errors import InventoryError


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("hosts: {}\n")
    return path


def test_an_explicit_path_wins_over_everything(tmp_path: Path) -> None:
    _touch(tmp_path / "inventory" / "hosts.yaml")
    env = {"FIREDUP_INVENTORY": str(tmp_path / "env.yaml"), "HOME": str(tmp_path)}
    assert find_inventory("mine.yaml", cwd=tmp_path, env=env) == Path("mine.yaml")


def test_the_env_var_comes_before_the_directory(tmp_path: Path) -> None:
    _touch(tmp_path / "inventory" / "hosts.yaml")
    env = {"FIREDUP_INVENTORY": "~/ops/hosts.yaml", "HOME": str(tmp_path)}
    found = find_inventory(None, cwd=tmp_path, env=env)
    assert found == Path("~/ops/hosts.yaml").expanduser()


def test_the_repository_layout_in_the_current_directory(tmp_path: Path) -> None:
    inv = _touch(tmp_path / "inventory" / "hosts.yaml")
    _touch(tmp_path / "firedup.yaml")
    assert find_inventory(cwd=tmp_path, env={"HOME": str(tmp_path)}) == inv


def test_the_nearest_parent_with_an_inventory_is_used(tmp_path: Path) -> None:
    _touch(tmp_path / "inventory" / "hosts.yaml")
    near = _touch(tmp_path / "ops" / "firedup.yaml")
    deep = tmp_path / "ops" / "roles" / "gpu"
    deep.mkdir(parents=True)
    assert find_inventory(cwd=deep, env={"HOME": str(tmp_path / "home")}) == near


def test_the_user_config_dir_comes_last(tmp_path: Path) -> None:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    home = tmp_path / "home"
    user = _touch(home / ".config" / "firedup" / "hosts.yaml")
    assert find_inventory(cwd=cwd, env={"HOME": str(home)}) == user
    xdg = _touch(tmp_path / "xdg" / "firedup" / "hosts.yaml")
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert find_inventory(cwd=cwd, env=env) == xdg


def test_nothing_found_names_every_place_looked(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as caught:
        find_inventory(cwd=tmp_path, env={"HOME": str(tmp_path / "home")})
    message = str(caught.value)
    assert "--inventory" in message and "$FIREDUP_INVENTORY" in message
    assert "inventory/hosts.yaml" in message and "firedup.yaml" in message
    assert str(tmp_path) in message and ".config/firedup/hosts.yaml" in message
    assert caught.value.exit_code == 2


def test_the_walk_stops_at_home(tmp_path: Path) -> None:
    """Issue 28 §1: nothing above $HOME is taken (another account may write there)."""
    _touch(tmp_path / "firedup.yaml")
    home = tmp_path / "home" / "me"
    (home / "ops").mkdir(parents=True)
    with pytest.raises(InventoryError, match="no inventory found"):
        find_inventory(cwd=home / "ops", env={"HOME": str(home)})
    mine = _touch(home / "firedup.yaml")
    assert find_inventory(cwd=home / "ops", env={"HOME": str(home)}) == mine


def test_a_world_writable_directory_is_refused_unless_sticky(tmp_path: Path) -> None:
    from firedup.config.trust import distrust

    shared = tmp_path / "shared"
    inv = _touch(shared / "firedup.yaml")
    shared.chmod(0o777)
    assert "others may write to" in (distrust(inv) or "")
    with pytest.raises(InventoryError, match="refusing the inventory") as err:
        find_inventory(cwd=shared, env={"HOME": str(tmp_path)})
    assert "--inventory" in str(err.value) and "FIREDUP_SAFE_DIRECTORY" in str(err.value)
    shared.chmod(0o1777)  # like /tmp: others cannot replace a file that is ours
    assert distrust(inv) is None
    shared.chmod(0o777)
    env = {"HOME": str(tmp_path), "FIREDUP_SAFE_DIRECTORY": str(shared)}
    assert find_inventory(cwd=shared, env=env) == inv
    inv.chmod(0o666)
    assert "others may write to it" in (distrust(inv) or "")
