"""Weighted keyword matching for many profiles at once (the filtering processor's step 5).

Relevance of a page for a profile is the sum over the profile's keywords of weight x
occurrences: case-insensitive, whole words, a keyword may be a phrase, and keywords are
literal text (``c++`` is not a pattern). The cost grows with the page, not with the number of
profiles: the page's words are looked up in one index built over every profile's keywords,
instead of every profile scanning the page.

- A keyword made of words separated by spaces or hyphens (``java``, ``web crawler``,
  ``e-mail``) is matched word by word on the page's ``\\w+`` words; the characters between
  the page's words do not matter.
- Any other keyword (``c++``, ``.net``, ``c#``, ``a.b``) is matched
  by one regular expression over the text, built once from all such keywords, escaped. An
  occurrence touches no word character on either side ("c++" is not found in "c++11").

Pure Python over plain values: no Scrapy, no lxml.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from webrace.records.aci import SNIPPETS, render_summary

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


class KeywordIndex:
    def __init__(self, profiles: Mapping[str, Iterable[tuple[str, float]]]) -> None:
        self.owners_of: dict[str, list[tuple[str, float]]] = defaultdict(list)  # keyword -> [(profile, weight)]
        self.singles: set[str] = set()  # one-word keywords
        self.pairs: set[tuple[str, str]] = set()  # two-word keywords
        self.longer: dict[tuple[str, str], set[tuple[str, ...]]] = defaultdict(set)  # first two words -> keywords
        special: set[str] = set()
        self.profiles = 0
        for profile, keywords in profiles.items():
            self.profiles += 1
            for key, weight in keywords:
                key = normalize_keyword(key)
                if not key:
                    continue
                if key not in self.owners_of:  # each distinct keyword sorted once (profiles share them)
                    if WORDS_KEY.fullmatch(key):
                        words = tuple(key.split())
                        if len(words) == 1:
                            self.singles.add(key)
                        elif len(words) == 2:
                            self.pairs.add(words)
                        else:
                            self.longer[words[:2]].add(words)
                    else:
                        special.add(key)
                self.owners_of[key].append((profile, float(weight)))
        self.owners_of = dict(self.owners_of)
        self.longer = dict(self.longer)
        self.special_re = _literal_alternation(special) if special else None

    def match(self, text: str, reading: str | None = None) -> Matches:
        """Count the page's words and word pairs once (C-speed Counters), keep those that
        are keywords, then give each matched keyword's count to the profiles that chose it:
        the work is the page's plus the matches', whatever the number of profiles.
        ``reading``: the text summaries quote, of the same length as ``text`` (see
        :class:`webrace.annotation.text.PageText`)."""
        counts = self.count(text)
        relevance: dict[str, float] = defaultdict(float)
        matched: dict[str, list[str]] = defaultdict(list)
        for key, count in counts.items():
            for profile, weight in self.owners_of[key]:
                relevance[profile] += weight * count
                matched[profile].append(key)
        return Matches(text, dict(relevance), counts, dict(matched), reading)

    def count(self, text: str) -> dict[str, int]:
        """Each keyword's occurrences in ``text`` (only those that occur)."""
        lowered = text.lower()
        words = WORD.findall(lowered)
        counts: dict[str, int] = {}
        word_counts = Counter(words)
        for word in word_counts.keys() & self.singles:
            counts[word] = word_counts[word]
        if self.pairs or self.longer:
            pair_counts = Counter(zip(words, words[1:], strict=False))
            for pair in pair_counts.keys() & self.pairs:
                counts[" ".join(pair)] = pair_counts[pair]
            for first_two in pair_counts.keys() & self.longer.keys():
                for i in range(len(words) - 2):
                    if (words[i], words[i + 1]) == first_two:
                        for key_words in self.longer[first_two]:
                            if tuple(words[i:i + len(key_words)]) == key_words:
                                joined = " ".join(key_words)
                                counts[joined] = counts.get(joined, 0) + 1
        if self.special_re is not None:
            for m in self.special_re.finditer(lowered):
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        return counts


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


def naive_relevance(text: str, keywords: Iterable[tuple[str, float]]) -> float:
    """The per-profile way (one regular expression per keyword): the baseline of the bench."""
    total = 0.0
    for key, weight in keywords:
        key = " ".join(key.lower().split())
        words_only = WORDS_KEY.fullmatch(key)
        escaped = re.escape(key).replace(r"\ ", r"\W+" if words_only else r"\s+")
        pattern = rf"(?<!\w){escaped}(?!\w)"
        total += weight * len(re.findall(pattern, text.lower()))
    return total


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
