"""stub"""

from fabric import task


@task
def discover(c, host=None):  # type: ignore[no-untyped-def]
    """First contact with a node (placeholder)."""
