"""firedup's fab entry point: the namespace is built in tasks/; nothing else lives here."""

from tasks import ns

__all__ = ["ns"]
