"""A CPU node's memory as `fab status` shows it, from a recorded /proc/meminfo."""

from __future__ import annotations

from firedup.launch.hostmem import parse_meminfo

MEMINFO = """MemTotal:       24641364 kB
MemFree:        19954200 kB
MemAvailable:   22919376 kB
Buffers:          190220 kB
HugePages_Total:       0
"""


def test_meminfo_gives_total_and_available() -> None:
    memory = parse_meminfo(MEMINFO)
    assert memory is not None
    assert memory.total_bytes == 24641364 * 1024
    assert memory.available_bytes == 22919376 * 1024
    assert memory.text() == "memory 1.6/23.5 GiB used"
    assert memory.to_json() == {"total_bytes": 24641364 * 1024, "available_bytes": 22919376 * 1024}


def test_a_meminfo_without_the_figures_is_none() -> None:
    assert parse_meminfo("") is None
    assert parse_meminfo("MemTotal: 10 kB\n") is None
