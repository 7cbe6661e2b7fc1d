"""Handing workers to a router: the Router seam (base), its kinds (sglang), drain (metrics).

Every call is made on the worker's node through its connection (firedup/node/sh/http_call.py),
so a router that only the cluster can reach works through a bastion, as the wait does.
"""
