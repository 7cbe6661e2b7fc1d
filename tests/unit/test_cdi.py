"""Preflight's CDI check (pure): the node's specs, parsed, against the devices a run asks for."""

from __future__ import annotations

import json

from firedup.preflight.cdi import check_cdi, parse_specs
from firedup.preflight.model import Outcome

NVIDIA_YAML = b"""cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
- name: GPU-4f1c
- name: all
"""


def _out(*specs: tuple[str, bytes]) -> bytes:
    return b"".join(path.encode() + b"\0" + text + b"\0" for path, text in specs)


def test_specs_in_yaml_and_json_are_read_and_what_is_no_spec_defines_nothing() -> None:
    extra = json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": 1}]})
    raw = b"banner from an rc file\n" + _out(
        ("/etc/cdi/nvidia.yaml", NVIDIA_YAML),
        ("/var/run/cdi/more.json", extra.encode()),
        ("/etc/cdi/broken.yaml", b"kind: [unclosed"),
        ("/etc/cdi/list.yaml", b"- a\n- b\n"),
        ("/etc/cdi/nokind.yaml", b"devices: [{name: '9'}]\n"),
    )
    assert parse_specs(raw) == {"nvidia.com/gpu": frozenset({"0", "1", "GPU-4f1c", "all"})}
    assert parse_specs(b"") == {}


def test_every_device_asked_for_must_be_named() -> None:
    specs = parse_specs(_out(("/etc/cdi/nvidia.yaml", NVIDIA_YAML)))
    assert check_cdi(specs, "nvidia.com/gpu", (0,)).outcome is Outcome.PASS
    assert check_cdi(specs, "nvidia.com/gpu", None).outcome is Outcome.PASS  # `all`
    missing = check_cdi(specs, "nvidia.com/gpu", (0, 3))
    assert missing.outcome is Outcome.FAIL and "nvidia.com/gpu=3 " in missing.detail
    assert "it names 0,all and 1 more by UUID" in missing.detail
    none = check_cdi({}, "nvidia.com/gpu", (0,))
    assert none.outcome is Outcome.FAIL and "no CDI spec" in none.detail
    assert none.hint is not None and "nvidia-ctk cdi generate" in none.hint
