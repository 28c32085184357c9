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
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from html import unescape
from typing import Any

import numpy as np
from w3lib.encoding import html_to_unicode

from webrace.annotation.matcher import FEW_KEYWORDS, KeywordIndex, Matches, normalize_keyword
from webrace.annotation.text import PageText, page_texts
from webrace.records.aci import Aci, Keys, PageAcis, extension_of
from webrace.rounds.groups import Members
from webrace.rounds.memory import building
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
    acis: PageAcis | list[Aci]  # a page's ACIs (iterating a PageAcis gives Aci objects)
    filtered: bool  # some owner's URD has keywords (the page was judged at all)
    archived: bool  # some URD without keywords keeps every page it reaches

    @property
    def irrelevant(self) -> bool:
        """Judged, relevant to nobody, kept for no archive: its body may be dropped."""
        return self.filtered and not self.acis and not self.archived


class RoundIndex:
    """A round's keywords, for judging each page for all its owners at once.

    ``keywords`` counts a page's keywords; ``weights`` holds each URD's keywords as matched
    (normalised) with their weights. The same as arrays: the URDs with keywords are columns
    (``urd_ids``), with their owner, threshold and urgency; every keyword (in sorted order)
    owns a slice of ``pair_urd`` / ``pair_weight`` naming the URDs that chose it. A page's
    relevance for every URD is then one weighted count over the pairs of the keywords it
    matched (array work, whatever the number of owners)."""

    def __init__(self, keywords: KeywordIndex, weights: dict[str, dict[str, float]], urds: Iterable[Urd] = ()) -> None:
        self.keywords = keywords
        self.weights = weights
        with_keywords = {u.id: u for u in urds if u.id in weights}
        self.plain = frozenset()  # URDs without keywords (they archive what they reach)
        self.urd_ids = sorted(weights)
        self.position = {u: n for n, u in enumerate(self.urd_ids)}
        self.owners = sorted({with_keywords[u].owner for u in self.urd_ids if u in with_keywords})
        self.owner_names = np.array(self.owners, dtype=object)
        owner_no = {o: n for n, o in enumerate(self.owners)}
        self.owner_of = np.array([owner_no.get(with_keywords[u].owner, -1) if u in with_keywords else -1
                                  for u in self.urd_ids], dtype=np.int64)
        self.threshold = np.array([_threshold(with_keywords.get(u)) for u in self.urd_ids], dtype=np.float64)
        self.urgent = np.array([bool(with_keywords[u].urgent) if u in with_keywords else False
                                for u in self.urd_ids], dtype=bool)
        self.vocabulary = sorted({k for w in weights.values() for k in w})
        self.kw_position = {k: n for n, k in enumerate(self.vocabulary)}
        kw_position, position = self.kw_position, self.position
        pair_kw = np.fromiter((kw_position[k] for mine in weights.values() for k in mine), dtype=np.int64)
        pair_urd = np.repeat(np.fromiter((position[u] for u in weights), dtype=np.int64, count=len(weights)),
                             np.fromiter(map(len, weights.values()), dtype=np.int64, count=len(weights)))
        pair_weight = np.fromiter((w for mine in weights.values() for w in mine.values()), dtype=np.float64)
        order = np.lexsort((pair_urd, pair_kw))  # by keyword, then URD (a URD names a keyword once)
        self.pair_urd, self.pair_weight = pair_urd[order], pair_weight[order]
        self.kw_start = np.searchsorted(pair_kw[order], np.arange(len(self.vocabulary) + 1))
        self._reach: OrderedDict[Hashable, tuple[Members | None, Reach]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def build(cls, urds: Iterable[Urd]) -> RoundIndex:
        urds = list(urds)
        weights: dict[str, dict[str, float]] = {}
        # URDs naming the same keyword with the same weight share its object (webrace.urd): each
        # is normalised once (the objects are kept alive, so their ids stay theirs)
        seen: dict[int, tuple[Any, str, float]] = {}
        for urd in urds:
            if not urd.keywords:
                continue
            mine = weights[urd.id] = {}
            for kw in urd.keywords:
                known = seen.get(id(kw))
                if known is None:
                    known = seen[id(kw)] = (kw, normalize_keyword(kw.key), float(kw.weight))
                _, key, weight = known
                if key and weight > mine.get(key, float("-inf")):
                    mine[key] = weight
        index = cls(KeywordIndex.counting({key for _, key, _ in seen.values()}), weights, urds)
        index.plain = frozenset(u.id for u in urds if u.id not in weights)
        return index

    def reach(self, urd_ids: Sequence[str]) -> Reach:
        """What judging a page reached by these URDs needs (the same set of URDs reaches many
        pages: worked out once per set). A list that cannot change (the page items' shared
        :class:`~webrace.rounds.groups.Members`) is known by its identity: 10,000 ids are
        neither copied nor hashed again for every page."""
        shared = urd_ids if type(urd_ids) is Members else None
        key: Hashable = id(shared) if shared is not None else tuple(urd_ids)
        with self._lock:
            kept = self._reach.get(key)
            if kept is not None and kept[0] is shared:
                self._reach.move_to_end(key)
                return kept[1]
        found = Reach.of(self, urd_ids)
        with self._lock:
            self._reach[key] = (shared, found)  # holds the shared list: its id stays its
            while len(self._reach) > REACH_KEPT:
                self._reach.popitem(last=False)
        return found


REACH_KEPT = 64


@dataclass(frozen=True)
class Reach:
    """The URDs that reached a page, as the judgement needs them."""

    filtering: bool  # some of them have keywords
    archived: bool  # some of them have none: the page is kept for them
    single: np.ndarray  # per URD column: reached, and its owner's only reached URD with keywords
    shared: dict[int, list[int]]  # owner number -> the columns of their reached URDs, owners with several

    @classmethod
    def of(cls, index: RoundIndex, urd_ids: Sequence[str]) -> Reach:
        position = index.position
        columns = np.array(sorted({position[i] for i in urd_ids if i in position}), dtype=np.int64)
        archived = any(i in index.plain for i in urd_ids)
        single = np.zeros(len(index.urd_ids), dtype=bool)
        shared: dict[int, list[int]] = {}
        if len(columns):
            owners = index.owner_of[columns]
            per_owner = np.bincount(owners, minlength=len(index.owners))
            alone = per_owner[owners] == 1
            single[columns[alone]] = True
            for column, owner in zip(columns[~alone].tolist(), owners[~alone].tolist(), strict=True):
                shared.setdefault(owner, []).append(column)
        return cls(bool(len(columns)), archived, single, shared)


class FilteringProcessor:
    def __init__(self) -> None:
        self._indexes: OrderedDict[Hashable, RoundIndex] = OrderedDict()
        self._lock = threading.Lock()

    def index(self, key: Hashable, urds: Iterable[Urd]) -> RoundIndex:
        """The keyword index of a round (``key``: the round's id), built on first use."""
        with self._lock:  # built once: the threads judging a round's first pages wait for it
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
                return index
            with building():  # lives as long as the round (see webrace.rounds.memory)
                index = self._indexes[key] = RoundIndex.build(urds)
            while len(self._indexes) > INDEXES_KEPT:
                self._indexes.popitem(last=False)
            return index

    def judge(self, version: Version, urds: Sequence[Urd], index: RoundIndex) -> Judgement:
        """ACIs for the owners of ``urds`` (the URDs that reached the page) whose keywords
        the page matches enough."""
        return self.judge_reached(version, index.reach(tuple(u.id for u in urds)), index)

    def judge_reached(self, version: Version, reach: Reach, index: RoundIndex) -> Judgement:
        """:meth:`judge` for the URDs ``reach`` describes (see :meth:`RoundIndex.reach`)."""
        if not reach.filtering:
            return Judgement([], False, reach.archived)
        text, title = text_and_title(version.body, version.content_type)
        counts = index.keywords.count(text.matched) if text else {}
        if not counts:
            return Judgement([], True, reach.archived)
        matches = Matches(text.matched, {}, counts, {}, text.reading, many=len(counts) > FEW_KEYWORDS)
        kws = np.fromiter((index.kw_position[k] for k in counts), dtype=np.int64, count=len(counts))
        times = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        order = np.argsort(kws)
        kws, times = kws[order], times[order]
        starts = index.kw_start[kws]
        lengths = index.kw_start[kws + 1] - starts
        pairs = np.arange(int(lengths.sum())) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        pair_urd = index.pair_urd[pairs]
        pair_kw = np.repeat(kws, lengths)
        pair_score = index.pair_weight[pairs] * np.repeat(times, lengths)
        # summed in keyword order, so a URD's relevance is the same float however many share the index
        relevance = np.bincount(pair_urd, weights=pair_score, minlength=len(index.urd_ids))
        passing = reach.single & (relevance > 0) & (relevance >= index.threshold)
        # the keywords each passing URD matched, heaviest first (ties: by keyword)
        chosen = passing[pair_urd]
        pu, pk, ps = pair_urd[chosen], pair_kw[chosen], pair_score[chosen]
        order = np.lexsort((pk, -ps, pu))
        pu, pk = pu[order], pk[order]
        columns, first = np.unique(pu, return_index=True)
        owners = index.owner_of[columns]
        rel = relevance[columns]
        urgent = index.urgent[columns]
        # owners who matched the same keywords in the same order share a summary: each
        # passing URD's ordered keywords as one number, and the distinct numbers are the keys
        used = np.unique(pk)
        snippet_no = np.full(len(index.vocabulary), -1, dtype=np.int64)
        snippet_no[used] = np.arange(len(used))
        quoted = [index.vocabulary[kw] for kw in used.tolist()]  # summaries are made when asked for
        by_snippet = snippet_no[pk]
        key_of, key_list = _keys(by_snippet, first, len(used))
        if reach.shared:  # owners with several URDs: their union
            shared = [(owner, made) for owner, mine in reach.shared.items()
                      if (made := _shared(mine, index, counts)) is not None]
            if shared:
                owners = np.concatenate((owners, np.array([o for o, _ in shared], dtype=np.int64)))
                rel = np.concatenate((rel, np.array([m[0] for _, m in shared], dtype=np.float64)))
                urgent = np.concatenate((urgent, np.array([m[2] for _, m in shared], dtype=bool)))
                key_list = list(key_list)  # tuples, to be extended
                known = {k: n for n, k in enumerate(key_list)}
                extra = []
                for _, (_, kws, _) in shared:
                    for kw in kws:
                        if snippet_no[kw] < 0:
                            snippet_no[kw] = len(quoted)
                            quoted.append(index.vocabulary[kw])
                    key = tuple(snippet_no[list(kws)].tolist())
                    if key not in known:
                        known[key] = len(key_list)
                        key_list.append(key)
                    extra.append(known[key])
                key_of = np.concatenate((key_of, np.array(extra, dtype=np.int64)))
        if not len(owners):
            return Judgement([], True, reach.archived)
        by_name = np.argsort(owners, kind="stable")  # owner numbers follow names
        extension, fmt = extension_of(version.url, version.media_type)
        acis = PageAcis(version.url, version.digest, version.number, version.fetched, version.size, fmt, extension,
                        title, quoted, key_list, index.owner_names[owners[by_name]].tolist(),
                        rel[by_name].tolist(), key_of[by_name].tolist(), urgent[by_name].tolist(),
                        text=(text.matched, text.reading if text.reading != text.matched else None),
                        owner_index=owners[by_name], owner_space=index.owner_names, matches=matches)
        return Judgement(acis, True, reach.archived)


def _keys(items: np.ndarray, first: np.ndarray, alphabet: int) -> tuple[np.ndarray, Keys]:
    """Groups of ``items`` (group ``g`` is ``items[first[g]:first[g + 1]]``, every item below
    ``alphabet``): each group's number in the list of distinct groups, and that list."""
    if not len(first):
        return np.zeros(0, dtype=np.int64), Keys([], [0])
    sizes = np.diff(np.append(first, len(items)))
    base = alphabet + 1
    longest = max(1, int(62 // max(1.0, np.log2(base))))  # digits an int64 holds
    place = np.arange(len(items)) - np.repeat(first, sizes)
    fits = np.repeat(sizes <= longest, sizes)
    digits = np.where(fits, (items + 1) * np.power(base, np.minimum(place, longest - 1), dtype=np.int64), 0)
    codes = np.add.reduceat(digits, first)
    codes[sizes > longest] = -1 - np.arange(int((sizes > longest).sum()))  # long ones: each its own
    distinct, where, key_of = np.unique(codes, return_index=True, return_inverse=True)
    chosen_first, chosen_size = first[where], sizes[where]
    starts = np.concatenate(([0], np.cumsum(chosen_size)))
    keys = Keys(items[np.arange(starts[-1]) - np.repeat(starts[:-1] - chosen_first, chosen_size)], starts)
    long = np.flatnonzero(distinct < 0).tolist()
    long_keys: dict[tuple[int, ...], int] = {}  # long groups alike share a key too
    for n in long:
        long_keys.setdefault(keys[n], n)
    if len(long_keys) < len(long):
        remap = np.arange(len(distinct))
        for n in long:
            remap[n] = long_keys[keys[n]]
        key_of = remap[key_of]
    return key_of.astype(np.int64), keys


def _threshold(urd: Urd | None) -> float:
    """The relevance a URD's owner must reach (none: any above 0)."""
    return float("-inf") if urd is None or urd.threshold is None else float(urd.threshold)


def _shared(columns: list[int], index: RoundIndex,
            counts: dict[str, int]) -> tuple[float, tuple[int, ...], bool] | None:
    """An owner with several URDs reaching the page: relevance, matched keywords (heaviest
    first) and urgency over the union of those URDs' keywords, the highest weight where two
    name the same keyword; None when it is not relevant enough."""
    weights: dict[str, float] = {}
    for column in columns:
        for key, weight in index.weights[index.urd_ids[column]].items():
            weights[key] = max(weights.get(key, float("-inf")), weight)
    matched = sorted((k for k in weights if counts.get(k)), key=lambda k: (-weights[k] * counts[k], k))
    if not matched:
        return None
    relevance = 0.0
    for key in sorted(matched):  # keyword order, as the array sums
        relevance += weights[key] * counts[key]
    if relevance <= 0 or relevance < float(np.min(index.threshold[columns])):
        return None
    return relevance, tuple(index.kw_position[k] for k in matched), bool(index.urgent[columns].any())


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
