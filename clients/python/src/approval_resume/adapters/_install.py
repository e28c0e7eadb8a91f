"""What an adapter says when its framework is missing: the install of this package with the framework's extra, from
the repository (docs/design.md §16, "Install instructions name only what installs"). No package named approval-resume
is published, so a hint naming it would fail, and would send whoever follows it to a name anyone could register."""


def install_hint(extra: str) -> str:
    """The pip command for the package with `extra`, from a checkout of the repository."""
    return f'pip install "<checkout>/clients/python[{extra}]" (from a checkout of the approval-resume repository)'


def missing_framework(module: str, framework: str, extra: str) -> ImportError:
    return ImportError(f"{module} needs {framework}: {install_hint(extra)}")
