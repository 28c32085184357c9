"""Default configuration lists shipped with WebRACE (the seed's conf/ directory).

Read through importlib.resources so that they are found inside a zipped egg too, as
scrapyd runs the project.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from webrace.urls import read_list


def packaged(name: str) -> list[str]:
    """Entries of the shipped list ``name`` (``ignore.types``, ``mime.types``)."""
    return read_list(files(__name__).joinpath(name).read_text(encoding="utf-8").splitlines())


def conf_list(settings: Any, setting: str, default: str) -> list[str]:
    """The list a setting names (a file path or a list of entries), or the shipped default."""
    value = settings.get(setting)
    return read_list(value) if value else packaged(default)
