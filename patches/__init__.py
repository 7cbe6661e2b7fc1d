"""Package data: the patches firedup ships, installed as firedup.patches (see setup.py)."""
