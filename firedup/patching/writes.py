"""Write a set of files on the node all or nothing, purge their bytecode, and verify by hash.

Used by apply and revert alike. Each file is replaced atomically (`node.put` renames a
temporary file); if any step fails, every file already replaced gets its previous bytes back
and the record is restored, then one PatchError says what happened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from firedup.errors import DeployError, PatchError
from firedup.inventory import HostSpec
from firedup.node import Node
from firedup.patching.plan import Contents
from firedup.patching.record import Record, save_record, sha256
from firedup.patching.target import settle


@dataclass(frozen=True)
class Written:
    purged: tuple[str, ...]
    record_path: str


def _write(node: Node, path: str, data: bytes | None, mode: int | None) -> None:
    if data is None:
        node.run(["rm", "-f", "--", path], what=f"remove {path}")
    else:
        node.put(data, path, mode=mode if mode is not None else 0o644)


def _verify(node: Node, host: HostSpec, env: dict[str, str], new: Contents) -> tuple[str, ...]:
    purged: list[str] = []
    for settled in settle(node, host, env, list(new)):
        want = new[settled.path]
        if settled.errors:
            raise PatchError(f"{settled.path}: {'; '.join(settled.errors)}")
        if settled.sha256 != (None if want is None else sha256(want)):
            raise PatchError(f"{settled.path}: content on the node differs from what was written")
        purged.extend(settled.purged)
    return tuple(purged)


def write_all(
    node: Node,
    host: HostSpec,
    env: dict[str, str],
    changes: tuple[Contents, Contents],
    modes: dict[str, int | None],
    records: tuple[Record, Record],
    *,
    record_first: bool,
    on_progress: Callable[[str], None],
) -> Written:
    """Replace `changes` = (old, new) contents on the node, moving the record old -> new.

    `record_first` writes the new record before any file (apply: the record must know the
    originals before they are overwritten); otherwise after every file is in place (revert:
    the record must not forget a patch that is still on disk).
    """
    old, new = changes
    old_record, new_record = records
    touched: list[str] = []
    record_written = False
    try:
        if record_first:
            record_path = save_record(node, host, new_record)
            record_written = True
        for path, data in new.items():
            on_progress(f"writing {path}")
            touched.append(path)
            _write(node, path, data, modes.get(path))
        purged = _verify(node, host, env, new)
        if not record_first:
            record_path = save_record(node, host, new_record)
        return Written(purged, record_path)
    except BaseException as exc:
        problem = _rollback(node, host, env, old, touched, modes, old_record, record_written)
        if not isinstance(exc, DeployError):
            raise
        raise PatchError(
            f"{exc.message}; {problem or 'every file was restored, nothing changed'}",
            hint=exc.hint,
        ) from exc


def _rollback(
    node: Node,
    host: HostSpec,
    env: dict[str, str],
    old: Contents,
    touched: list[str],
    modes: dict[str, int | None],
    old_record: Record,
    record_written: bool,
) -> str | None:
    """Put back the previous bytes; describe what could not be restored (None: all was)."""
    try:
        for path in touched:
            _write(node, path, old[path], modes.get(path))
        _verify(node, host, env, {p: old[p] for p in touched})
        if record_written:
            save_record(node, host, old_record)
    except DeployError as exc:
        return (
            f"ROLLBACK INCOMPLETE ({exc.message}); the node's record lists the originals, "
            "run `fab sync-patches --revert` once the node is reachable"
        )
    return None
