"""Issue 28 §5: a secret is masked in the forms an engine or a client may print it in."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

from firedup.config.secrets import MASK, _remember, mask

SECRET = 'hf_AbC/d+e=f "q"&z'


def test_every_encoded_form_of_a_secret_is_masked() -> None:
    _remember(SECRET)
    raw = SECRET.encode()
    forms = {
        "plain": SECRET,
        "url": quote(SECRET, safe=""),
        "url-plus": quote_plus(SECRET),
        "url-path": quote(SECRET),
        "json": json.dumps(SECRET)[1:-1],
        "json-ascii": json.dumps(SECRET + "é", ensure_ascii=True)[1:-2],
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode(),
    }
    for offset in (1, 2):  # inside a longer base64 blob (a Basic auth header, say)
        blob = base64.b64encode(b"u:"[:offset] + raw + b"tail").decode()
        forms[f"base64+{offset}"] = blob
    for name, form in forms.items():
        shown = mask(f"before {form} after")
        assert SECRET not in shown and MASK in shown, (name, form, shown)
        leftover = shown.replace(MASK, "")
        assert form not in leftover, (name, shown)


def test_masking_does_not_eat_ordinary_text() -> None:
    _remember("tok_12345678")
    text = "loading weights 12345678 took 3.2s; url=http://x/v1/models"
    assert mask(text) == text
