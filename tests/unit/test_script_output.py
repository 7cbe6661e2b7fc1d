"""The one parser for node scripts' key=value answers (docs/architecture.md)."""

from __future__ import annotations

from firedup.node.base import field_values, parse_fields

NOISY = (
    b"Welcome to gpu-node! Last login: Mon Feb 23\n"  # a banner: no '='
    b"pid=4242\r\n"  # CRLF from a chatty shell
    b'meta={"a": "b=c"}\n'  # split at the first '=' only
    b"run=r1\nrun=r2\n"
    b"export FOO=bar\n"  # an rc file's noise that happens to hold '='
    b"\xff\xfebroken bytes\n"
)


def test_fields_split_at_the_first_equals_and_strip_values() -> None:
    fields = parse_fields(NOISY)
    assert fields["pid"] == "4242" and fields["meta"] == '{"a": "b=c"}'
    assert fields["run"] == "r2"  # the last of a repeated key
    assert "Welcome to gpu-node! Last login: Mon Feb 23" not in fields


def test_known_keys_keep_noise_out() -> None:
    assert parse_fields(NOISY, {"pid", "run"}) == {"pid": "4242", "run": "r2"}
    assert parse_fields("", {"pid"}) == {}


def test_repeated_keys_in_order() -> None:
    assert field_values(NOISY, "run") == ["r1", "r2"]
    assert field_values("kept=r3 current\nkept=r4 last failed\n", "kept") == [
        "r3 current",
        "r4 last failed",
    ]
    assert field_values(NOISY, "removed") == []
