"""sglang-router (SGLang Model Gateway) 0.3: `POST /workers {"url"}` (202, queued),
`GET /workers`, `DELETE /workers/{id}` (202). Read off the real router (sglang-router 0.3.2):
on POST it asks the worker's /health, /server_info and /model_info before listing it; the
legacy `/add_worker?url=` is gone (404)."""

from __future__ import annotations

from urllib.parse import quote

from firedup.config.router import RouterSpec
from firedup.errors import RouterError
from firedup.node.base import Node
from firedup.router.base import Worker, listed
from firedup.router.http import Answer, node_http


class SglangRouter:
    def __init__(self, node: Node, python: str, spec: RouterSpec) -> None:
        self.node, self.python, self.url = node, python, spec.url

    def describe(self) -> str:
        return f"sglang-router {self.url}"

    def _call(self, method: str, path: str, body: object = None) -> Answer:
        return node_http(self.node, self.python, method, self.url + path, body=body)

    def workers(self) -> list[Worker]:
        answer = self._call("GET", "/workers")
        data = answer.json()
        if answer.status != 200 or not isinstance(data, dict):
            raise RouterError(f"{self.describe()}: GET /workers answered {answer.status}")
        out = []
        for item in data.get("workers") or []:
            if isinstance(item, dict) and isinstance(item.get("url"), str):
                healthy = bool(item.get("is_healthy", True))
                out.append(Worker(item["url"], healthy, str(item.get("id") or "")))
        return out

    def add(self, worker_url: str) -> None:
        answer = self._call("POST", "/workers", {"url": worker_url})
        if answer.status not in (200, 201, 202):
            raise RouterError(
                f"{self.describe()} refused worker {worker_url}: {answer.status} "
                f"{answer.body.strip()[:200]}"
            )

    def remove(self, worker_url: str) -> None:
        worker = listed(self, worker_url)
        if worker is None:
            return
        answer = self._call("DELETE", "/workers/" + quote(worker.ident or worker_url, safe=""))
        if answer.status not in (200, 202, 204, 404):
            raise RouterError(
                f"{self.describe()} did not remove worker {worker_url}: {answer.status} "
                f"{answer.body.strip()[:200]}"
            )
