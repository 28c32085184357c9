"""What an ACI's summary quotes: a page's text around the first occurrence of the keywords
an owner matched (pure: no Scrapy, no lxml).

:class:`Matches` holds a page's text (as matched and as it reads, see
:class:`webrace.annotation.text.PageText`) and finds, once per keyword, where it first occurs
and the window of text around it a summary quotes; :func:`summary` makes an owner's summary
from the keywords they matched, heaviest first. The filtering processor
(:mod:`webrace.annotation.matcher`) fills the counts when it judges a page; an ACI store makes
summaries later from the same text (:class:`webrace.records.aci.PageAcis`).

Keywords are literal text, matched as whole words, case-insensitive (see
:func:`normalize_keyword`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s")  # what str.isspace() calls space (both use Py_UNICODE_ISSPACE)
_LAST_SPACE = re.compile(r"\s\S*\Z")
FEW_KEYWORDS = 8  # summaries for up to this many keywords search for each; beyond, one pass for all
WORDS_KEY = re.compile(r"\w+(?:[\s-]+\w+)*")  # words separated by spaces or hyphens


@dataclass
class Matches:
    """What one page matched: each profile's relevance, and each matched keyword's count.
    Positions are found on demand (:meth:`spans`), for the few profiles that need a summary."""

    text: str
    relevance: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # keyword -> occurrences
    keywords: dict[str, list[str]] = field(default_factory=dict)  # profile -> its matched keywords
    # the text as it reads, for summaries: ``text`` with what was masked out of matching (the
    # text of links, see webrace.annotation.text) put back, position for position; None: ``text``
    reading: str | None = None

    _spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict, repr=False)  # first spans found
    many: bool = False  # many keywords' first places will be asked for: find them in one pass from the start
    _first: dict[str, tuple[int, int]] | None = field(default=None, repr=False)
    _pairs: dict[tuple[str, str], tuple[int, int]] | None = field(default=None, repr=False)
    # summaries of thousands of owners quote the same few places: each found and cut once
    _windows: dict[str, tuple[int, int] | None] = field(default_factory=dict, repr=False)
    _snippets: dict[tuple[int, int], str] = field(default_factory=dict, repr=False)
    _summaries: dict[tuple, str] = field(default_factory=dict, repr=False)  # (keywords, limit) -> summary

    def window(self, keyword: str) -> tuple[int, int] | None:
        """The text around ``keyword``'s first occurrence that a summary quotes: ``SNIPPET``
        characters each side, cut back to whole words (None: it does not occur)."""
        if keyword in self._windows:
            return self._windows[keyword]
        span = self.first_span(keyword)
        window = None
        if span is not None:
            text = self.reading if self.reading is not None else self.text
            start, end = span
            lo, hi = max(0, start - SNIPPET), min(len(text), end + SNIPPET)
            if 0 < lo < start and not text[lo - 1].isspace():  # whole words at the edges:
                space = _SPACE.search(text, lo, start)  # forward to just after a space, at most to the match
                lo = space.end() if space else start
            if end < hi < len(text) and not text[hi].isspace():
                space = _LAST_SPACE.search(text, end + 1, hi)  # back to the last space, at most to the match
                hi = space.start() if space else end
            window = (lo, hi)
        self._windows[keyword] = window
        return window

    def snippet(self, window: tuple[int, int]) -> str:
        """The text of ``window`` as a summary quotes it (spaces collapsed, "..." where cut)."""
        quoted = self._snippets.get(window)
        if quoted is None:
            text = self.reading if self.reading is not None else self.text
            lo, hi = window
            quoted = self._snippets[window] = (("..." if lo > 0 else "") + " ".join(text[lo:hi].split())
                                               + ("..." if hi < len(text) else ""))
        return quoted

    def quoted(self, keyword: str) -> tuple[int, int, str] | None:
        """``keyword``'s window and its text as a summary quotes it (None: not found)."""
        window = self.window(keyword)
        return None if window is None else (*window, self.snippet(window))

    def first_span(self, keyword: str) -> tuple[int, int] | None:
        """Where ``keyword`` first occurs. One pass over the page's words answers every one-
        and two-word keyword (summaries for thousands of owners cost one scan, not one each)."""
        key = normalize_keyword(keyword)
        words = key.split() if WORDS_KEY.fullmatch(key) else None
        if words is None or len(words) > 2 or (self._first is None and not self.many
                                                 and len(self._spans) < FEW_KEYWORDS):
            if key not in self._spans:  # a search stops at the first occurrence: cheap for a few keys
                found = _keyword_pattern(key).search(self._lower())
                self._spans[key] = [found.span(1)] if found else []
            spans = self._spans[key]
            return spans[0] if spans else None
        if len(words) == 1:
            return self._first_words().get(words[0])
        return self._first_pairs().get((words[0], words[1]))

    def _first_words(self) -> dict[str, tuple[int, int]]:
        """Each word's first span (built from the end, so the first occurrence stays)."""
        if self._first is None:
            found = list(WORD.finditer(self._lower()))
            self._words = [m.group() for m in found]
            self._word_spans = [m.span() for m in found]
            self._first = dict(zip(reversed(self._words), reversed(self._word_spans), strict=True))
        return self._first

    def _first_pairs(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Each pair of neighbouring words' first span."""
        if self._pairs is None:
            self._first_words()
            words, spans = self._words, self._word_spans
            pairs = list(zip(words, words[1:], strict=False))
            joined = [(a[0], b[1]) for a, b in zip(spans, spans[1:], strict=False)]
            self._pairs = dict(zip(reversed(pairs), reversed(joined), strict=True))
        return self._pairs

    def spans(self, keyword: str) -> list[tuple[int, int]]:
        """Where ``keyword`` occurs in the text (start, end), in order."""
        return [(m.start(1), m.end(1)) for m in _keyword_pattern(keyword).finditer(self._lower())]

    def _lower(self) -> str:
        lowered = self.__dict__.get("_lowered")
        if lowered is None:
            lowered = self.__dict__["_lowered"] = self.text.lower()
        return lowered


@lru_cache(maxsize=65536)  # a round's URDs share their words: each normalised once
def normalize_keyword(key: str) -> str:
    """The form a keyword is matched and counted under (:attr:`Matches.counts`): lower case,
    whitespace collapsed, and "web-crawler" / "web  crawler" both ``"web crawler"``."""
    key = " ".join(key.lower().split())
    return " ".join(WORD.findall(key)) if WORDS_KEY.fullmatch(key) else key


def _keyword_pattern(keyword: str) -> re.Pattern[str]:
    if WORDS_KEY.fullmatch(keyword):
        return re.compile(r"(?<!\w)(" + r"\W+".join(WORD.findall(keyword)) + r")(?!\w)")
    return _literal_alternation([keyword])


def _literal_alternation(keys: Iterable[str]) -> re.Pattern[str]:
    """One pattern for literal keywords with non-word edges. Whole words: an occurrence
    touches no word character on either side (``c++`` matches "c++ code", not "abc++" or
    "c++11")."""
    alternatives = "|".join(re.escape(key).replace(r"\ ", r"\s+") for key in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<!\w)({alternatives})(?!\w)")


SNIPPETS = 3  # a summary quotes at most this many places of the text
SUMMARY_CHARS = 300


def render_summary(windows: Sequence[tuple[int, int, str] | None], limit: int = SUMMARY_CHARS) -> str:
    """A summary from the windows of the keywords an owner matched, heaviest first (each
    ``(start, end, quoted text)``, None where the keyword has no window): the first
    ``SNIPPETS`` that do not overlap one chosen before, in the order of the text, joined with
    a space, cut to ``limit`` characters."""
    chosen: list[tuple[int, int, str]] = []
    for window in windows:
        if window is None:
            continue
        lo, hi, _ = window
        if not any(lo < b and a < hi for a, b, _ in chosen):
            chosen.append(window)
        if len(chosen) == SNIPPETS:
            break
    joined = " ".join(text for _, _, text in sorted(chosen))
    return joined if len(joined) <= limit else joined[: limit - 3].rstrip() + "..."


SNIPPET = 60  # characters of context on each side of a match
MAX_SNIPPETS = SNIPPETS


def summary(matches: Matches, keywords: list[str], limit: int = 300) -> str:
    """Snippets of the text around the first occurrence of each matched keyword (in the
    order given, e.g. heaviest first), joined with " ... ", quoted as the page reads
    (:func:`webrace.records.aci.render_summary`)."""
    memo = (tuple(keywords), limit)
    known = matches._summaries.get(memo)
    if known is None:  # owners who matched the same keywords in the same order
        known = matches._summaries[memo] = render_summary([matches.quoted(key) for key in keywords], limit)
    return known
