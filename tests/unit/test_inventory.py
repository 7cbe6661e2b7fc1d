"""Inventory validation: every mistake is one clear message naming the file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from firedup.config.inventory import DEFAULT_INVENTORY, KeyPolicy, load_inventory, parse_inventory
from firedup.engine import Engine
from firedup.errors import InventoryError

GOOD: dict[str, Any] = {
    "hosts": {
        "a": {"address": "10.0.0.1", "workdir": "/srv/f", "deployment": "d"},
        "b": {"transport": "local", "workdir": "/tmp/x", "deployment": "d"},
    },
    "deployments": {"d": {"engine": "sglang", "model": "/m", "port": 8000, "tp": 8}},
    "groups": {"all": ["a", "b"]},
}


def parse(data: Any) -> Any:
    return parse_inventory(data, Path("inv.yaml"))


def with_host(**fields: Any) -> dict[str, Any]:
    host = {**GOOD["hosts"]["a"], **fields}
    return {**GOOD, "hosts": {"a": host}, "groups": {}}


def test_good_inventory_parses_with_defaults() -> None:
    inv = parse(GOOD)
    a = inv.host("a")
    assert (a.port, a.host_key_policy, a.transport, a.user) == (22, KeyPolicy.STRICT, "ssh", None)
    assert inv.deployment_for(a).engine is Engine.SGLANG
    assert [h.name for h in inv.select("all")] == ["a", "b"]
    assert [h.name for h in inv.select("b,a,b")] == ["b", "a"]


def test_shipped_inventory_is_valid() -> None:
    inv = load_inventory(DEFAULT_INVENTORY)
    assert {"gpu-node", "demo"} <= set(inv.hosts)
    assert inv.host("demo").workdir.startswith("/")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (with_host(port=70000), "hosts.a.port: Input should be less than or equal to 65535"),
        (with_host(port="ssh"), "hosts.a.port: Input should be a valid integer"),
        (with_host(adress="x"), "hosts.a.adress: unknown key"),
        (
            {**GOOD, "hosts": {"a": {"address": "x", "deployment": "d"}}},
            "hosts.a.workdir: required",
        ),
        (with_host(workdir="relative/dir"), "hosts.a.workdir: must be an absolute path"),
        (with_host(deployment="zzz"), "unknown deployment 'zzz'"),
        (with_host(host_key_policy="yolo"), "hosts.a.host_key_policy: Input should be 'strict'"),
        (with_host(address=None), "an ssh host needs 'address'"),
        (with_host(env={"BAD NAME": "1"}), "not a valid environment variable name"),
        (with_host(env={"FLAG": True}), "write booleans as strings"),
        ({**GOOD, "deployments": {"d": {"engine": "tgi", "model": "/m"}}}, "deployments.d.engine"),
        (
            {**GOOD, "deployments": {"d": {"engine": "vllm", "model": "/m", "args": {"port": 1}}}},
            "args.port: set it with the deployment key 'port'",
        ),
        (
            {**GOOD, "deployments": {"d": {"engine": "vllm", "model": "/m", "args": {"--tp": 1}}}},
            "write flags without dashes",
        ),
        ({**GOOD, "groups": {"g": ["a", "ghost"]}}, "groups.g: unknown hosts ghost"),
        ({"hosts": {}}, "deployments: required key is missing"),
        (["not", "a", "mapping"], "expected a mapping"),
    ],
)
def test_bad_inventory_names_file_and_key(data: Any, expected: str) -> None:
    with pytest.raises(InventoryError) as err:
        parse(data)
    assert str(err.value).startswith("inv.yaml: ")
    assert expected in str(err.value)
    assert err.value.exit_code == 2


def test_unknown_host_lists_known_ones() -> None:
    with pytest.raises(InventoryError, match=r"unknown host 'nope' in inv.yaml; known hosts: a, b"):
        parse(GOOD).host("nope")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="inventory file not found"):
        load_inventory(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: [unclosed\n")
    with pytest.raises(InventoryError, match="not valid YAML"):
        load_inventory(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text("hosts: {}\nhosts: {}\ndeployments: {}\n")
    with pytest.raises(InventoryError, match="duplicate key 'hosts'"):
        load_inventory(dup)


def test_inventory_dir_expands(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(
        "hosts: {l: {transport: local, workdir: '${INVENTORY_DIR}/../w', deployment: d}}\n"
        "deployments: {d: {engine: vllm, model: '${INVENTORY_DIR}/m'}}\n"
    )
    inv = load_inventory(path)
    assert inv.host("l").workdir == str(tmp_path.parent / "w")
    assert inv.deployments["d"].model == f"{tmp_path}/m"


def test_env_var_selects_inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "other.yaml"
    path.write_text(
        "hosts: {x: {transport: local, workdir: /w, deployment: d}}\n"
        "deployments: {d: {engine: vllm, model: /m}}\n"
    )
    monkeypatch.setenv("FIREDUP_INVENTORY", str(path))
    assert list(load_inventory().hosts) == ["x"]
