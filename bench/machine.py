"""The machine a bench ran on, and the versions of everything measured."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.tools import ansible_version
from tests.conftest import REPO, SSHD


def _first_line(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else "?"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine(with_ansible: bool) -> dict[str, Any]:
    commit = _first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = _first_line(["git", "-C", str(REPO), "status", "--porcelain", "--", "firedup"])
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "os": _first_line(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "python": sys.version.split()[0],
        "firedup_commit": commit + (" (firedup/ modified)" if dirty not in {"", "?"} else ""),
        "versions": {
            "firedup": _version("firedup"),
            "fabric": _version("fabric"),
            "invoke": _version("invoke"),
            "paramiko": _version("paramiko"),
            "openssh": _first_line([SSHD, "-V"]),
            "bash": re.sub(r"^GNU bash, version ", "", _first_line(["bash", "--version"])),
            "coreutils tail": _first_line(["tail", "--version"]),
            "ansible": ansible_version() if with_ansible else "not run",
        },
        "load_average_at_start": load_average(),
    }
