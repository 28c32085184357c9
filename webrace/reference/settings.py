"""The settings reference, read from ``webrace/settings.py`` itself: every name it sets, its
default as written there, and the comment that says what it means, in the module's groups.

The module is its own documentation (one comment per setting, STYLE.md), so its source is
read with :mod:`ast` (which names, which values) and :mod:`tokenize` (which comments):

- a setting's comment is the one on its line, else the block of comment lines right above it;
  settings written one under the other with no comment of their own share the comment above
  the first (``WEBRACE_MIN_DELAY`` / ``WEBRACE_MAX_DELAY``: "Bounds of that rest"), except
  Scrapy's own: what Scrapy's documentation says of them is theirs, and a comment above
  ``DOWNLOAD_DELAY`` is not about ``DOWNLOAD_TIMEOUT`` under it;
- blank lines separate groups; ``# --- Title ---`` starts a section, whose title a group
  without one of its own takes; a group whose first comment opens with ``Title: ...`` or
  ``Title (where): ...`` is titled so;
- a comment block followed by a blank line or the end of a group, with no setting under it,
  is a note of its group.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from scrapy.settings import default_settings

from webrace import settings as webrace_settings
from webrace.reference.markdown import code, fence, slug, text

SCRAPY_DOCS = "https://docs.scrapy.org/en/latest/search.html?q="
_SECTION = re.compile(r"^-{3,}\s*(.*?)\s*-*$")
_TITLED = re.compile(r"^([A-Z][^:.;]{2,60}?(?:\([^)]*\))?):\s+(\S.*)$", re.DOTALL)


@dataclass
class Setting:
    name: str
    source: str  # the default as written (an expression)
    description: str
    line: int

    @property
    def scrapy(self) -> bool:
        """One of Scrapy's own settings (then Scrapy's documentation says what it is)."""
        return hasattr(default_settings, self.name)


@dataclass
class Group:
    title: str
    settings: list[Setting] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def settings_path() -> Path:
    return Path(webrace_settings.__file__)


def read_settings(source: str | None = None) -> list[Group]:
    """The groups of settings in ``source`` (default: ``webrace/settings.py``), in order."""
    if source is None:
        source = settings_path().read_text(encoding="utf-8")
    lines = source.splitlines()
    comments, trailing = _comments(source)
    statements = {node.lineno: node for node in ast.parse(source).body}
    groups: list[Group] = []
    section, group = "The Scrapy project", None
    pending: list[str] = []  # comment lines waiting for the setting under them
    shared = ""  # the comment the previous setting had, for one written right under it
    number = 0
    while number < len(lines):
        number += 1
        if number in comments:
            heading = _SECTION.match(comments[number])
            if heading:
                section, group, pending, shared = heading.group(1), None, [], ""
            else:
                pending.append(comments[number])
            continue
        if not lines[number - 1].strip():
            if pending and group is not None:
                group.notes.append(" ".join(pending))
            group, pending, shared = None, [], ""
            continue
        node = statements.get(number)
        if node is None:  # inside a statement already read (the docstring's lines, a dict's)
            continue
        names = _names(node)
        if not names:  # the docstring, an import
            pending, shared = [], ""
            number = node.end_lineno or number
            continue
        own = trailing.get(number) or " ".join(pending)
        described = own or (shared if not all(hasattr(default_settings, n) for n in names) else "")
        if group is None:
            group = Group(section)
            groups.append(group)
            titled = _TITLED.match(" ".join(pending))
            if titled and not trailing.get(number):
                group.title, described = titled.group(1), _capital(titled.group(2))
        shared = described if not trailing.get(number) else shared
        value = ast.get_source_segment(source, node.value) or ""
        group.settings += [Setting(name, value, described, number) for name in names]
        pending = []
        number = node.end_lineno or number
    return _merged(groups)


def _comments(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """(line -> text of a comment alone on its line, line -> text of a comment after code)."""
    alone, trailing = {}, {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            body = token.string.lstrip("#").strip()
            if token.line[: token.start[1]].strip():
                trailing[token.start[0]] = body
            else:
                alone[token.start[0]] = body
    return alone, trailing


def _names(node: ast.stmt) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]


def _capital(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:]


def _merged(groups: list[Group]) -> list[Group]:
    """Groups one after the other with the same title (a section's groups without a title of
    their own) as one."""
    merged: list[Group] = []
    for group in groups:
        if merged and merged[-1].title == group.title:
            merged[-1].settings += group.settings
            merged[-1].notes += group.notes
        else:
            merged.append(group)
    return merged


def undescribed(groups: list[Group]) -> list[str]:
    """Settings of WebRACE's own (not Scrapy's) that no comment describes."""
    return [s.name for g in groups for s in g.settings if not s.scrapy and not s.description]


def settings_page(groups: list[Group] | None = None) -> str:
    groups = read_settings() if groups is None else groups
    out = [
        "# Settings",
        "",
        "Every setting WebRACE's project sets, read from `webrace/settings.py` (its defaults and comments) "
        "when these pages are built. Give another value with `-s NAME=VALUE` on the command line, or in "
        "your own settings module (`from webrace.settings import *`, then your changes). Scrapy's own "
        "settings link to Scrapy's documentation; what WebRACE sets them to, and why, is said here.",
        "",
    ]
    for group in groups:
        out += [f"## {text(group.title)}", ""]
        for setting in group.settings:
            out += _setting(setting)
        for note in group.notes:
            out += [f"*Note:* {text(note)}", ""]
    return "\n".join(out)


def _setting(setting: Setting) -> list[str]:
    out = [f"### {setting.name}", ""]
    if "\n" in setting.source:
        out += ["Default:", "", fence(setting.source, "python"), ""]
    else:
        out += [f"Default: {code(setting.source)}{_evaluated(setting)}", ""]
    if setting.description:
        out += [text(setting.description), ""]
    if setting.scrapy:
        out += [f"Scrapy's setting: see [{setting.name}]({SCRAPY_DOCS}{setting.name}) in Scrapy's documentation.", ""]
    return out


def _evaluated(setting: Setting) -> str:
    """`` (52428800)`` after a default written as arithmetic (``50 * 1024 * 1024``)."""
    try:
        tree = ast.parse(setting.source, mode="eval").body
    except SyntaxError:
        return ""
    if not isinstance(tree, ast.BinOp) or any(
        isinstance(n, ast.Name | ast.Call | ast.Attribute) for n in ast.walk(tree)
    ):
        return ""
    return f" ({getattr(webrace_settings, setting.name, '')!r})"


def anchor(name: str) -> str:
    """The link to setting ``name`` from another reference page."""
    return f"settings.md#{slug(name)}"
