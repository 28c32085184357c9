"""Text from outside (a WARC record's header, an argument, a file name) made safe to show on
a terminal or in a log: every character a terminal acts on instead of printing (ESC starting
a colour, title or clear-screen sequence; a newline faking a second line; a bidi override
reordering what follows) is written escaped, as ``repr`` writes it, and a long text is cut.
Pure: no Scrapy, no WebRACE import."""

from __future__ import annotations

DEFAULT_LIMIT = 200  # characters shown of a longer text


def printable(text: str, limit: int = DEFAULT_LIMIT) -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\n``, ``\\u202e``)
    and, beyond ``limit`` characters, cut with the total length said."""
    cut = text[:limit]
    safe = cut if cut.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)
    return safe if len(text) <= limit else f"{safe}... ({len(text):,} characters)"


__all__ = ["printable"]
