"""One HTTP call made ON THE NODE (stdlib only, any python >= 3.8): a router's control API or
a worker's /metrics, reached from where the worker runs, over the connection firedup holds.

usage: python -I -c THIS METHOD URL TIMEOUT_S [JSON_BODY]
Prints one JSON object: {"status": N, "body": TEXT} (the body cut at 256 KiB), or
{"error": TEXT, "refused": BOOL} when no answer came (refused: nothing listens there).
Parsed by firedup/router/http.py. Not imported by firedup: shipped as text, like
firedup/node/sh/*.sh.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

LIMIT = 256 * 1024
method, url, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
# A node's http_proxy must not see a call meant for a router or a server next to it.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
headers = {"Content-Type": "application/json"} if body is not None else {}
request = urllib.request.Request(url, data=body, method=method, headers=headers)
out: dict = {}
try:
    try:
        with opener.open(request, timeout=timeout) as response:
            out = {"status": int(response.status), "body": response.read(LIMIT)}
    except urllib.error.HTTPError as exc:
        out = {"status": int(exc.code), "body": exc.read(LIMIT)}
    out["body"] = out["body"].decode("utf-8", "replace")
except Exception as exc:  # an answer or the reason there was none, never a traceback
    reason = getattr(exc, "reason", exc)
    out = {"error": f"{type(exc).__name__}: {exc}"}
    out["refused"] = isinstance(reason, ConnectionRefusedError)
print(json.dumps(out))
