"""Package data: the jinja2 launch templates, installed as firedup.templates (see setup.py)."""
