"""The filtering processor (seed 003 section 6.2): one new version of a page, judged for
every owner it was fetched for.

Steps 1-4 (text without markup and links) are :func:`~webrace.annotation.text.page_texts`;
step 5 (weighted keywords) is one :class:`~webrace.annotation.matcher.KeywordIndex` over the
keywords of every URD of the round, built once per round and shared by all its pages, so a
page costs the same for 3 owners as for 10,000. Step 6 makes the ACIs.

Per owner, the profile is the union of the keywords of that owner's URDs that reached the
page (the highest weight where two name the same keyword); relevance is the sum of weight x
occurrences. An ACI is made when the relevance is above 0 and reaches the threshold of one
of those URDs (``<keywords threshold="...">``; none: any relevance above 0).

A URD without keywords filters nothing: its owner gets no ACIs, and the page is kept for it
(an archive, for rules that run over stored versions later). A page relevant to no owner and
kept for no archive is *irrelevant*: the crawl then drops its body
(``WEBRACE_DROP_IRRELEVANT``).

No Scrapy here: it runs in a worker thread, on plain values.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from html import unescape

from w3lib.encoding import html_to_unicode

from webrace.annotation.matcher import KeywordIndex, Matches, normalize_keyword, summary
from webrace.annotation.text import PageText, page_texts
from webrace.records.aci import Aci, extension_of
from webrace.urd import Urd

INDEXES_KEPT = 4  # rounds whose index is kept (continuous mode, several shared rounds)


@dataclass(frozen=True)
class Version:
    """The new version to judge."""

    url: str
    body: bytes
    content_type: str  # the Content-Type header as received ("" when absent)
    media_type: str  # its type/subtype
    digest: str
    number: int
    fetched: int  # epoch ms
    size: int


@dataclass(frozen=True)
class Judgement:
    acis: list[Aci]
    filtered: bool  # some owner's URD has keywords (the page was judged at all)
    archived: bool  # some URD without keywords keeps every page it reaches

    @property
    def irrelevant(self) -> bool:
        """Judged, relevant to nobody, kept for no archive: its body may be dropped."""
        return self.filtered and not self.acis and not self.archived


@dataclass(frozen=True)
class RoundIndex:
    """A round's keyword index, and each URD's keywords as matched (normalised) with weights."""

    keywords: KeywordIndex
    weights: dict[str, dict[str, float]]  # URD id -> normalised keyword -> weight

    @classmethod
    def build(cls, urds: Iterable[Urd]) -> RoundIndex:
        weights: dict[str, dict[str, float]] = {}
        for urd in urds:
            if not urd.keywords:
                continue
            mine = weights[urd.id] = {}
            for kw in urd.keywords:
                key = normalize_keyword(kw.key)
                if key:
                    mine[key] = max(mine.get(key, float("-inf")), float(kw.weight))
        return cls(KeywordIndex({i: list(w.items()) for i, w in weights.items()}), weights)


class FilteringProcessor:
    def __init__(self) -> None:
        self._indexes: OrderedDict[Hashable, RoundIndex] = OrderedDict()
        self._lock = threading.Lock()

    def index(self, key: Hashable, urds: Iterable[Urd]) -> RoundIndex:
        """The keyword index of a round (``key``: the round's id), built on first use."""
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
                return index
        index = RoundIndex.build(urds)
        with self._lock:
            self._indexes[key] = index
            while len(self._indexes) > INDEXES_KEPT:
                self._indexes.popitem(last=False)
        return index

    def judge(self, version: Version, urds: Sequence[Urd], index: RoundIndex) -> Judgement:
        """ACIs for the owners of ``urds`` (the URDs that reached the page) whose keywords
        the page matches enough."""
        filtering = [u for u in urds if u.keywords]
        archived = len(filtering) < len(urds)
        if not filtering:
            return Judgement([], False, archived)
        text, title = text_and_title(version.body, version.content_type)
        matches = index.keywords.match(text.matched, text.reading) if text else Matches("")
        # Only an owner with a URD whose keywords the page matched can be relevant: the others
        # are passed over in C-speed set work, so the loop below is as long as the ACIs made.
        relevant = {u.owner for u in filtering if u.id in matches.keywords}
        by_owner: dict[str, list[Urd]] = defaultdict(list)
        for urd in filtering:
            if urd.owner in relevant:
                by_owner[urd.owner].append(urd)
        extension, fmt = extension_of(version.url, version.media_type)
        counts = matches.counts
        acis = []
        for owner, owned in sorted(by_owner.items()):
            relevance, weights = _relevance(matches, owned, index)
            if relevance <= 0 or not _passes(relevance, owned):
                continue
            matched = sorted((k for k in weights if counts.get(k)), key=lambda k: (-weights[k] * counts[k], k))
            acis.append(Aci(
                owner=owner, uri=version.url, relevance=relevance, updatetime=version.fetched,
                filesize=version.size, version=version.number, docbase=version.digest,
                summary=summary(matches, matched), urgent=any(u.urgent for u in owned),
                format=fmt, extension=extension, title=title,
            ))
        return Judgement(acis, True, archived)


def _relevance(matches: Matches, urds: list[Urd], index: RoundIndex) -> tuple[float, dict[str, float]]:
    """An owner's relevance and keyword weights: the union of their URDs' keywords."""
    if len(urds) == 1:  # the index summed it already
        return matches.relevance.get(urds[0].id, 0.0), index.weights.get(urds[0].id, {})
    weights: dict[str, float] = {}
    for urd in urds:
        for key, weight in index.weights.get(urd.id, {}).items():
            weights[key] = max(weights.get(key, float("-inf")), weight)
    return sum(w * matches.counts.get(k, 0) for k, w in weights.items()), weights


def _passes(relevance: float, urds: list[Urd]) -> bool:
    thresholds = [u.threshold for u in urds]
    if any(t is None for t in thresholds):
        return True
    return relevance >= float(min(thresholds))


def text_and_title(body: bytes, content_type: str) -> tuple[PageText, str]:
    """The page's text (markup removed; links' text masked in the text matched) and title,
    decoded the way Scrapy does (HTTP charset, BOM, meta charset, then sniffing);
    undecodable bytes are replaced."""
    try:
        _, unicode_body = html_to_unicode(content_type or None, body)
    except (LookupError, ValueError):
        unicode_body = body.decode("utf-8", errors="replace")
    unicode_body = unicode_body.replace("\x00", "")
    return page_texts(unicode_body), _title(unicode_body)


def _title(text: str) -> str:
    """The first ``<title>``'s text, entities decoded (looked for near the top only)."""
    found = _TITLE.search(text, 0, 65536)
    if not found:
        return ""
    return " ".join(_TAG.sub(" ", unescape(found.group(1))).split())[:300]


_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
