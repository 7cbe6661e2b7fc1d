"""The package layout pyproject.toml cannot express: the repository keeps tasks/, templates/
and patches/ at its top level (the brief's layout), and the wheel installs them inside the
firedup package (firedup.tasks, firedup.templates, firedup.patches), never as a top-level
`tasks`. Everything else about the project lives in pyproject.toml."""

from setuptools import find_packages, setup

MAPPED = {"firedup.tasks": "tasks", "firedup.templates": "templates", "firedup.patches": "patches"}

setup(
    packages=[*find_packages(include=["firedup", "firedup.*"]), *MAPPED],
    package_dir=MAPPED,
    package_data={
        "firedup.node.sh": ["*.sh", "*.py"],
        "firedup.releases": ["*.json"],
        "firedup.templates": ["*.j2", "*/*.j2"],
        "firedup.patches": ["*.md", "*/*/*.yaml", "*/*/*.diff"],
    },
)
