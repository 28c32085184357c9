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

from webrace.records.quoting import (  # noqa: F401 - the matcher's public names, defined with the summaries
    FEW_KEYWORDS,
    MAX_SNIPPETS,
    SNIPPET,
    WORD,
    WORDS_KEY,
    Matches,
    _keyword_pattern,
    _literal_alternation,
    normalize_keyword,
    summary,
)


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
                    self._learn(key, special)
                self.owners_of[key].append((profile, float(weight)))
        self.owners_of = dict(self.owners_of)
        self.longer = dict(self.longer)
        self.special_re = _literal_alternation(special) if special else None

    @classmethod
    def counting(cls, keys: Iterable[str]) -> KeywordIndex:
        """An index that only counts these keywords (normalised) in a page (:meth:`count`),
        for a caller that keeps who chose them itself (``match`` finds no profile)."""
        index = cls({})
        special: set[str] = set()
        for key in keys:
            if key and key not in index.owners_of:
                index._learn(key, special)
                index.owners_of[key] = []
        index.longer = dict(index.longer)
        index.special_re = _literal_alternation(special) if special else None
        return index

    def _learn(self, key: str, special: set[str]) -> None:
        """Where the count looks for ``key``: a word, a pair of words, longer, or literally."""
        if WORDS_KEY.fullmatch(key):
            words = tuple(key.split())
            if len(words) == 1:
                self.singles.add(key)
            elif len(words) == 2:
                self.pairs.add(words)
            else:
                self.longer.setdefault(words[:2], set()).add(words)
        else:
            special.add(key)

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


