"""Reaching a node: the Node interface, its SSH and local implementations, the static
scripts run on the node (node/sh/), and node-wide facts: probe and lock.
"""
