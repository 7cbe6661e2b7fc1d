"""Starting a server: the rendered launch script, the run directory and its start/stop,
and the GPUs a deployment uses.
"""
