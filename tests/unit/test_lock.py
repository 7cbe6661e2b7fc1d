"""Reading the lock's state from recorded script output: pure."""

from __future__ import annotations

import base64
import json

from firedup.node.lock import LockOwner, LockState, parse_lock_status, parse_record

OWNER = {
    "operator": "alice@laptop",
    "local_pid": 4242,
    "operation": "deploy",
    "started_at": 1771756200.5,
    "detail": "run 20260222T103000Z-abc123",
}


def record(pid: int = 777, owner: object = OWNER) -> str:
    text = json.dumps({"holder_pid": pid, "acquired_at": 1771756200.75, "owner": owner})
    return base64.b64encode(text.encode()).decode()


def status(held: str, holder: str, rec: str | None = None, now: str = "1771756260.0") -> bytes:
    lines = [f"now={now}", f"held={held}"]
    if rec is not None:
        lines.append(f"record={rec}")
    return ("\n".join([*lines, f"holder={holder}"]) + "\n").encode()


def test_free_when_nothing_holds_and_nothing_is_left() -> None:
    assert parse_lock_status("n", status("no", "none")) is None


def test_held_by_a_live_holder_names_its_owner_and_age() -> None:
    info = parse_lock_status("n", status("yes", "ours", record()))
    assert info is not None and info.state is LockState.HELD
    assert info.owner == LockOwner(**OWNER)  # type: ignore[arg-type]
    assert info.holder_pid == 777 and info.age_s == 59.25
    text = info.describe()
    assert "deploy by alice@laptop (local pid 4242) [run 20260222T103000Z-abc123]" in text
    assert "since 2026-02-22 10:30:00 UTC (59s ago), holder pid 777 on the node" in text
    assert info.to_json()["owner"]["operator"] == "alice@laptop"


def test_a_record_whose_holder_is_gone_is_stale() -> None:
    info = parse_lock_status("n", status("no", "gone", record()))
    assert info is not None and info.state is LockState.STALE and info.holder_pid == 777


def test_a_flock_without_its_holders_record_is_held_by_someone_unknown() -> None:
    for holder, rec in (("none", None), ("gone", record()), ("foreign", record())):
        info = parse_lock_status("n", status("yes", holder, rec))
        assert info is not None and info.state is LockState.HELD
        assert info.owner is None and info.holder_pid is None
        assert "unknown owner" in info.describe()


def test_a_live_holder_counts_as_held_even_if_proc_locks_missed_it() -> None:
    info = parse_lock_status("n", status("no", "ours", record()))
    assert info is not None and info.state is LockState.HELD and info.holder_pid == 777


def test_unreadable_records_do_not_raise() -> None:
    for bad in ("", "!!!", base64.b64encode(b"[1]").decode(), record(owner={"operator": 1})):
        _, _, owner = parse_record(bad)
        assert owner is None
    assert parse_record(record(owner="x"))[0] == 777
    info = parse_lock_status("n", status("no", "gone", "garbage", now="bad"))
    assert info is not None and info.state is LockState.STALE and info.age_s is None


def test_an_endless_answer_from_the_holder_is_bounded() -> None:
    """Issue 28 §4: the operator's memory is bounded against any stream from the node."""
    import itertools

    import pytest

    from firedup.errors import LockedError
    from firedup.node.lock import _first_lines

    endless = itertools.repeat(b"x" * 65536)  # no `locked pid=` ever comes
    with pytest.raises(LockedError, match="too long"):
        _first_lines(endless, "n", 60)
