"""nvidia-smi for the simulated node: 8 H200s whose memory is held by live simulator processes."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from firedup_sim import gpustate

DRIVER = "570.133.20"
CUDA = "12.8"
UUIDS = [f"GPU-5f1c0a2e-7d3b-4c1a-9e0f-{i:012x}" for i in range(gpustate.GPU_COUNT)]


def _gpu_fields(i: int, used: int) -> dict[str, tuple[str, str]]:
    """name -> (value, unit); units are dropped with nounits."""
    return {
        "index": (str(i), ""),
        "name": (gpustate.GPU_NAME, ""),
        "uuid": (UUIDS[i], ""),
        "pci.bus_id": (f"00000000:{0x18 + 0x10 * i:02X}:00.0", ""),
        "driver_version": (DRIVER, ""),
        "count": (str(gpustate.GPU_COUNT), ""),
        "memory.total": (str(gpustate.TOTAL_MIB), " MiB"),
        "memory.used": (str(used), " MiB"),
        "memory.free": (str(gpustate.TOTAL_MIB - used), " MiB"),
        "utilization.gpu": ("0" if used == 0 else "12", " %"),
        "temperature.gpu": ("31" if used == 0 else "38", ""),
    }


APP_ALIASES = {"used_gpu_memory": "used_memory"}


def _app_fields(u: gpustate.Usage) -> dict[str, tuple[str, str]]:
    return {
        "pid": (str(u.pid), ""),
        "process_name": (u.name, ""),
        "used_memory": (str(u.used_mib), " MiB"),
        "gpu_uuid": (UUIDS[u.gpu], ""),
        "gpu_bus_id": (f"00000000:{0x18 + 0x10 * u.gpu:02X}:00.0", ""),
    }


def _header(field: str, unit: str) -> str:
    return f"{field} [{unit.strip()}]" if unit else field


def _csv(rows: list[dict[str, tuple[str, str]]], fields: list[str], fmt: str) -> str:
    opts = set(fmt.split(","))
    out = []
    if "noheader" not in opts:
        sample = rows[0] if rows else {}
        out.append(", ".join(_header(f, sample.get(f, ("", ""))[1]) for f in fields))
    for row in rows:
        out.append(", ".join(row[f][0] + ("" if "nounits" in opts else row[f][1]) for f in fields))
    return "".join(line + "\n" for line in out)


def _query(spec: str, fmt: str, ids: set[int] | None, apps: bool) -> int:
    fields = [APP_ALIASES.get(f.strip(), f.strip()) for f in spec.split(",") if f.strip()]
    usages = gpustate.live_usages()
    valid: Callable[[str], bool]
    if apps:
        rows = [_app_fields(u) for u in usages if ids is None or u.gpu in ids]
        valid = _app_fields(gpustate.Usage(0, 0, "", 0)).__contains__
    else:
        rows = [
            _gpu_fields(i, sum(u.used_mib for u in usages if u.gpu == i))
            for i in range(gpustate.GPU_COUNT)
            if ids is None or i in ids
        ]
        valid = _gpu_fields(0, 0).__contains__
    for field in fields:
        if not valid(field):
            sys.stdout.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
    if not fmt.startswith("csv"):
        sys.stdout.write("--format must be csv (the simulator only speaks csv)\n")
        return 2
    sys.stdout.write(_csv(rows, fields, fmt))
    return 0


def _row(*cols: str) -> str:
    widths = (41, 24, 22)
    return "|" + "|".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + "|"


def _table() -> str:
    usages = gpustate.live_usages()
    rule = "+" + "-" * 89 + "+"
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y"),
        rule,
        f"| NVIDIA-SMI {DRIVER}".ljust(30)
        + f"Driver Version: {DRIVER}".ljust(32)
        + f"CUDA Version: {CUDA}".ljust(28)
        + "|",
        "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
        _row(
            " GPU  Name                 Persistence-M",
            " Bus-Id          Disp.A",
            " Volatile Uncorr. ECC",
        ),
        _row(
            " Fan  Temp   Perf          Pwr:Usage/Cap",
            "           Memory-Usage",
            " GPU-Util  Compute M.",
        ),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for i in range(gpustate.GPU_COUNT):
        used = sum(u.used_mib for u in usages if u.gpu == i)
        lines.append(
            _row(
                f"   {i}  {gpustate.GPU_NAME}".ljust(37) + "On  ",
                f"   00000000:{0x18 + 0x10 * i:02X}:00.0 Off ",
                " " * 20 + "0 ",
            )
        )
        temp, watts = (31, 76) if used == 0 else (38, 121)
        lines.append(
            _row(
                f" N/A   {temp}C    P0    {watts}W /  700W ",
                f"{used}MiB / {gpustate.TOTAL_MIB}MiB ".rjust(24),
                f"{0 if used == 0 else 12:>6}%      Default ",
            )
        )
        lines.append("+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+")
    lines += [
        "",
        rule,
        "| Processes:".ljust(90) + "|",
        "|  GPU   GI   CI        PID   Type   Process name".ljust(78) + "GPU Memory |",
        "|        ID   ID".ljust(78) + "Usage      |",
        "|" + "=" * 89 + "|",
    ]
    if not usages:
        lines.append("|  No running processes found".ljust(90) + "|")
    for u in sorted(usages, key=lambda x: (x.gpu, x.pid)):
        name = u.name[:40]
        lines.append(
            f"|  {u.gpu:>3}   N/A  N/A  {u.pid:>9}      C   {name:<40}{u.used_mib:>8}MiB |"
        )
    lines.append(rule)
    return "\n".join(lines) + "\n"


LEGEND_LINES = (
    ("X", "Self"),
    (
        "SYS",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
        "(e.g., QPI/UPI)",
    ),
    (
        "NODE",
        "Connection traversing PCIe as well as the interconnect between PCIe Host "
        "Bridges within a NUMA node",
    ),
    ("PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
    (
        "PXB",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    ),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("NV#", "Connection traversing a bonded set of # NVLinks"),
)
LEGEND = "\nLegend:\n\n" + "".join(f"  {k:<4} = {v}\n" for k, v in LEGEND_LINES)
HALF = gpustate.GPU_COUNT // 2  # GPUs 0-3 on NUMA node 0, 4-7 on node 1 (two sockets)


def _link(a: int, b: int, kind: str) -> str:
    if a == b:
        return " X "
    if kind == "nvswitch":
        return "NV18"  # an HGX H200 board: every pair through NVSwitch
    if a // HALF != b // HALF:
        return "SYS"
    return "PIX" if a // 2 == b // 2 else "NODE"  # a PCIe box: pairs share a switch


def topology() -> str:
    """`nvidia-smi topo -m` as the real one prints it (tab-separated; the driver's double tab
    before GPU NUMA ID included). FIREDUP_SIM_TOPOLOGY: nvswitch (default) or pcie."""
    kind = os.environ.get("FIREDUP_SIM_TOPOLOGY", "nvswitch")
    n = gpustate.GPU_COUNT
    head = "".join(f"\tGPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    lines = [head]
    for a in range(n):
        numa = a // HALF
        cpus = f"{numa * 56}-{numa * 56 + 55},{112 + numa * 56}-{112 + numa * 56 + 55}"
        links = "".join(f"\t{_link(a, b, kind)}" for b in range(n))
        lines.append(f"GPU{a}{links}\t{cpus}\t{numa}\t\tN/A")
    return "\n".join(lines) + "\n" + LEGEND


def main(argv: list[str]) -> int:
    if argv[:1] == ["topo"]:
        if argv[1:] != ["-m"]:
            sys.stdout.write("The simulator knows only `nvidia-smi topo -m`.\n")
            return 2
        sys.stdout.write(topology())
        return 0
    query = apps = None
    fmt = "csv"
    ids: set[int] | None = None
    for arg in argv:
        if arg.startswith("--query-gpu="):
            query = arg.split("=", 1)[1]
        elif arg.startswith("--query-compute-apps="):
            query, apps = arg.split("=", 1)[1], True
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1]
        elif arg.startswith(("--id=", "-i=")):
            ids = {int(x) for x in arg.split("=", 1)[1].split(",")}
        elif arg == "-L" or arg == "--list-gpus":
            for i in range(gpustate.GPU_COUNT):
                sys.stdout.write(f"GPU {i}: {gpustate.GPU_NAME} (UUID: {UUIDS[i]})\n")
            return 0
        else:
            sys.stdout.write(
                "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
            )
            return 2
    if query is None:
        sys.stdout.write(_table())
        return 0
    return _query(query, fmt, ids, bool(apps))
