"""This machine as a node: for the demo, and for running firedup on the GPU node itself.

Same interface as the SSH node (firedup.node.base.Node): argv lists through subprocess, atomic
writes through a temporary file and rename, a streamed command through a pipe.
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from firedup.errors import CommandResult, CommandTimeoutError, RemoteCommandError
from firedup.node.base import require_ok


class LocalNode:
    """This machine as a node: for the demo, and for running firedup on the GPU node itself."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def generation(self) -> int:
        return 0  # a local node never reconnects

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: bool = True,
        what: str = "",
    ) -> CommandResult:
        try:
            proc = subprocess.run(
                list(argv), capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            raise CommandTimeoutError(
                f"{self.name}: {argv[0]} timed out after {timeout_s} s"
            ) from exc
        except FileNotFoundError as exc:
            proc = subprocess.CompletedProcess(list(argv), 127, b"", str(exc).encode())
        result = CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr, self.name)
        return require_ok(result, what) if check else result

    def put(self, data: bytes, path: str, *, mode: int = 0o600) -> None:
        target = Path(path)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            result = CommandResult(("read", path), 1, b"", str(exc).encode(), self.name)
            raise RemoteCommandError(result, f"read {path}") from exc

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        proc = subprocess.Popen(
            list(argv), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True
        )
        assert proc.stdout is not None
        try:
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
                if not ready:
                    yield b""
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    return
                yield chunk
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdout.close()

    def close(self) -> None:
        pass
