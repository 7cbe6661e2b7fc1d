"""The suite's engine image, built locally (nothing can be pulled here): a root file system
holding this machine's python and the simulated engines, imported with `podman import`.

Cached by a hash of its inputs (this file, sim/python, sim/bin, the python binary): a second
session finds the image and builds nothing. Debian merges /usr, so /bin, /lib and /lib64 are
links into usr/ in the image too; only what the engines and firedup's node scripts run is
copied, with the shared libraries `ldd` names for each.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPOSITORY = "localhost/firedup-test/sim-sglang"
TOOLS = ("bash", "sh", "env", "cat", "sleep", "mkdir", "chmod", "rm", "ls", "sha256sum", "id")
SITE_PACKAGES = (
    f"/usr/local/lib/python{sys.version_info.major}.{sys.version_info.minor}/dist-packages"
)
CONF_TEXT = '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n'


def containers_conf() -> str:
    """CONTAINERS_CONF as scripts/test.sh sets it, or a file with the same settings."""
    given = os.environ.get("CONTAINERS_CONF")
    if given:
        return given
    path = Path(tempfile.gettempdir()) / f"firedup-test-containers-{os.getuid()}.conf"
    if not path.exists() or path.read_text() != CONF_TEXT:
        path.write_text(CONF_TEXT)
    return str(path)


def podman(*args: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": containers_conf()}
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=check, env=env, **kw
    )  # type: ignore[call-overload]


def _python() -> Path:
    return Path(os.path.realpath(shutil.which("python3", path="/usr/bin") or sys.executable))


def _inputs_key() -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(_python().read_bytes()[: 1 << 20])
    for root in (REPO / "sim" / "python", REPO / "sim" / "bin"):
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _libs(binaries: list[Path]) -> set[str]:
    out = subprocess.run(["ldd", *map(str, binaries)], capture_output=True, text=True).stdout
    return set(re.findall(r"(/\S+\.so[^\s:]*)", out))


def _rootfs(root: Path) -> None:
    python = _python()
    stdlib = Path(f"/usr/lib/python{sys.version_info.major}.{sys.version_info.minor}")
    if not stdlib.is_dir():
        stdlib = Path(sys.base_prefix) / "lib" / python.name
    for sub in ("usr/bin", "usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/local/bin", "tmp", "etc"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
        (root / link).symlink_to(target)
    binaries = [python, *(Path(p) for t in TOOLS if (p := shutil.which(t, path="/usr/bin:/bin")))]
    for binary in binaries:
        shutil.copy2(binary, root / "usr/bin" / binary.name)
    (root / "usr/bin/python3").symlink_to(python.name)
    shutil.copytree(
        stdlib,
        root / stdlib.relative_to("/"),
        symlinks=True,
        ignore=shutil.ignore_patterns("__pycache__", "test", "idlelib", "tkinter"),
    )
    dynload = sorted((stdlib / "lib-dynload").glob("*.so"))
    for lib in _libs(binaries + dynload):
        dest = root / "usr/lib/x86_64-linux-gnu" / Path(lib).name
        if "ld-linux" in lib:
            dest = root / "usr/lib64" / Path(lib).name
        shutil.copy2(os.path.realpath(lib), dest)
    site = root / SITE_PACKAGES.lstrip("/")
    shutil.copytree(REPO / "sim" / "python", site, ignore=shutil.ignore_patterns("__pycache__"))
    for tool in (REPO / "sim" / "bin").iterdir():
        shutil.copy2(tool, root / "usr/local/bin" / tool.name)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")


def sim_image() -> str:
    """The image's name, built now unless a session before built the same inputs."""
    name = f"{REPOSITORY}:{_inputs_key()}"
    lock = Path(tempfile.gettempdir()) / "firedup-test-image.lock"
    with lock.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # pytest-xdist workers build it once between them
        if podman("image", "exists", name, check=False).returncode == 0:
            return name
        with tempfile.TemporaryDirectory(prefix="firedup-rootfs-") as tmp:
            _rootfs(Path(tmp))
            tar = subprocess.Popen(["tar", "-C", tmp, "-c", "."], stdout=subprocess.PIPE)
            podman("import", "--change", "CMD=bash", "-", name, stdin=tar.stdout)
            tar.wait()
    return name
