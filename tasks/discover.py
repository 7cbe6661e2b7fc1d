"""`fab discover`: first contact with a node, and its inventory entry ready to paste."""

from __future__ import annotations

from fabric import task
from invoke.context import Context

from firedup.errors import UsageError
from firedup.node.ssh import open_node
from firedup.ops.discover import Contact, contact_spec, entry_text, gather

from .common import reporting, say, whole


@task(
    help={
        "host": "the node's address (an IP, a name or an ssh_config alias): not an inventory host",
        "user": "login user (default: ssh_config's, else yours)",
        "port": "SSH port (default: ssh_config's, else 22)",
        "identity-file": "private key to log in with",
        "known-hosts": "known_hosts file to check the node's key against",
        "accept-new": "trust the node's key on first contact (appended to known_hosts)",
        "python": "the node's python that runs the discovery (default python3)",
    }
)
def discover(
    c: Context,
    host: str | None = None,
    user: str | None = None,
    port: str | None = None,
    identity_file: str | None = None,
    known_hosts: str | None = None,
    accept_new: bool = False,
    python: str = "python3",
) -> None:
    """First contact: pythons with sglang/vllm, GPUs and their users, running servers, and an
    inventory entry (YAML, printed on stdout) that `fab deploy` accepts as it is."""
    with reporting():
        if not host:
            raise UsageError("discover: --host ADDRESS is required")
        contact = Contact(
            address=host,
            user=user,
            port=whole("port", port, 22, minimum=1) if port else None,
            identity_file=identity_file,
            known_hosts=known_hosts,
            accept_new=accept_new,
        )
        node = open_node(contact_spec(contact))
        try:
            facts = gather(node, python)
        finally:
            node.close()
        say(entry_text(facts, contact))
