"""Markdown for the reference pages: text from docstrings, comments and help strings, made
safe to render (what they hold between backticks stays code, the rest is escaped where
Markdown would read it as markup), code spans, fences and tables."""

from __future__ import annotations

import re
from collections.abc import Iterable

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_MARKUP = re.compile(r"[\\*_\[\]<>|]")  # emphasis, links, raw HTML, table cells
_ESCAPES = {"<": "&lt;", ">": "&gt;", "|": "&#124;"}


def text(plain: str) -> str:
    """``plain`` (prose whose code is in backticks, as our help texts and comments write it)
    as Markdown that renders it as written: one line, code spans kept, markup escaped."""
    plain = " ".join(plain.split())
    out, last = [], 0
    for span in _CODE_SPAN.finditer(plain):
        out.append(_escape(plain[last : span.start()]))
        out.append(code(span.group(2).strip("`").strip() or span.group(2)))
        last = span.end()
    out.append(_escape(plain[last:]))
    return "".join(out)


def _escape(plain: str) -> str:
    return _MARKUP.sub(lambda m: _ESCAPES.get(m.group(), "\\" + m.group()), plain)


def code(value: str) -> str:
    """An inline code span holding ``value`` exactly (backticks in it included), on one line
    (Python-Markdown's tables leave a ``|`` inside a code span alone)."""
    value = " ".join(str(value).split())
    ticks = "`" * (max((len(t) for t in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def fence(body: str, lang: str = "") -> str:
    """A fenced code block; longer fences than any run of backticks in ``body``."""
    ticks = "`" * max(3, max((len(t) for t in re.findall(r"`+", body)), default=0) + 1)
    return f"{ticks}{lang}\n{body.rstrip()}\n{ticks}"


def table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A table of cells already in Markdown (each on one line)."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def slug(title: str) -> str:
    """The anchor MkDocs gives a heading (its default ``toc`` slugify): lower case, words by ``-``."""
    title = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", title)
