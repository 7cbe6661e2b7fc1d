"""Shared machinery of the simulated GPU node (stdlib only, runs on the node's python3)."""
