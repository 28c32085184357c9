"""ACIs (seed 003 Table 6): what one owner is told about one new version of one page.

An ACI's id is the page version's part (:func:`page_key` of its URL and body digest) followed
by the owner's part (:func:`owner_key`): stable per owner, page and version, computed without
touching the other owners of the page, and found again by a store that keeps a page's ACIs
together (the page part names the page, the owner part the row). ACIs stored before this
scheme keep the id they were given.

:class:`PageAcis` holds the ACIs of one page version for many owners as columns (the page's
fields once, per owner a relevance, an urgency and which of the page's distinct summaries is
theirs): what the crawl makes, stores and emits, so that a page relevant to 10,000 owners
costs arrays, not 10,000 objects. Iterating it gives :class:`Aci` objects.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from lxml import etree

from webrace.records.quoting import SNIPPETS, SUMMARY_CHARS, Matches, render_summary, summary  # noqa: F401
from webrace.xmlutil import safe_parser


@dataclass(frozen=True)
class Aci:
    owner: str
    uri: str
    relevance: float
    updatetime: int  # epoch ms of the fetch
    filesize: int
    version: int
    docbase: str  # SHA-256 of the stored body
    summary: str
    urgent: bool = False
    expired: bool = False
    format: str = "html"
    extension: str = "html"
    title: str = ""  # the page's <title>, for feeds and the PIR page
    # stable per owner, page and version: a field, so feed exports and `aci list` carry it;
    # "" (the default) computes it, a stored ACI passes the id it was stored under
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", aci_id(self.owner, self.uri, self.docbase))

    def to_xml(self) -> str:
        root = etree.Element("aci", id=self.id, owner=self.owner, extension=self.extension, format=self.format,
                             relevance=f"{self.relevance:g}", updatetime=str(self.updatetime),
                             filesize=str(self.filesize), version=str(self.version))
        etree.SubElement(root, "uri").text = self.uri
        etree.SubElement(root, "urgency", urgent="1" if self.urgent else "0")
        etree.SubElement(root, "docbase").text = self.docbase
        etree.SubElement(root, "expired", expir="true" if self.expired else "false")
        etree.SubElement(root, "summary").text = _xml_safe(self.summary)
        if self.title:
            etree.SubElement(root, "title").text = _xml_safe(self.title)
        return etree.tostring(root, encoding="unicode")

    @classmethod
    def from_xml(cls, text: str) -> Aci:
        root = etree.fromstring(text.encode(), safe_parser())
        return cls(
            owner=root.get("owner"), uri=root.findtext("uri"), relevance=float(root.get("relevance")),
            updatetime=int(root.get("updatetime")), filesize=int(root.get("filesize")),
            version=int(root.get("version")), docbase=root.findtext("docbase"),
            summary=root.findtext("summary") or "", urgent=root.find("urgency").get("urgent") == "1",
            expired=root.find("expired").get("expir") == "true", format=root.get("format"),
            extension=root.get("extension"), title=root.findtext("title") or "", id=root.get("id") or "",
        )


PAGE_KEY_CHARS = 12  # hex characters of an ACI id naming the page version
OWNER_KEY_CHARS = 16  # and naming the owner (64 bits: no two owners of one page collide in practice)


def page_key(uri: str, docbase: str) -> str:
    """The page version's part of its ACIs' ids."""
    return hashlib.sha1(f"{uri}\n{docbase}".encode(), usedforsecurity=False).hexdigest()[:PAGE_KEY_CHARS]


@lru_cache(maxsize=65536)
def owner_key(owner: str) -> str:
    """The owner's part of their ACIs' ids (an owner has many ACIs: computed once)."""
    return hashlib.sha1(owner.encode(), usedforsecurity=False).hexdigest()[:OWNER_KEY_CHARS]


def aci_id(owner: str, uri: str, docbase: str) -> str:
    return page_key(uri, docbase) + owner_key(owner)


def split_id(aci_id: str) -> tuple[str, str] | None:
    """(page part, owner part) of an id of this scheme; None for an older id."""
    if len(aci_id) != PAGE_KEY_CHARS + OWNER_KEY_CHARS:
        return None
    return aci_id[:PAGE_KEY_CHARS], aci_id[PAGE_KEY_CHARS:]


@dataclass
class PageAcis:
    """The ACIs of one page version, as columns (see the module's docstring).

    ``keywords``: the keywords (normalised) owners' summaries quote; ``keys``: the distinct
    lists of them (indexes into ``keywords``, heaviest first) that owners' summaries are made
    from, or a summary as it is (a str); ``text``: the page's text as matched and as it reads
    (see :class:`webrace.annotation.text.PageText`), which summaries quote, made when asked
    for; per owner (sorted by name, one ACI each): ``owners``, ``relevance``, ``key`` (an
    index into ``keys``) and ``urgent``."""

    uri: str
    docbase: str
    version: int
    updatetime: int
    filesize: int
    format: str
    extension: str
    title: str
    keywords: list[str]
    keys: Sequence[tuple[int, ...] | str]  # a list (a str: a summary given as it is, PageAcis.of), or Keys
    owners: list[str]
    relevance: list[float]
    key: list[int]
    urgent: list[bool]
    expired: list[bool] = field(default_factory=list)  # empty: none is
    text: tuple[str, str | None] | None = field(default=None, repr=False)
    # the owners as numbers into ``owner_space`` (an array of names shared by every page of a
    # round), when the judgement made them: a store maps a space to its own numbers once
    owner_index: Any = field(default=None, repr=False, compare=False)
    owner_space: Any = field(default=None, repr=False, compare=False)
    matches: Any = field(default=None, repr=False, compare=False)  # the judgement's, for summaries
    _summaries: dict[int, str] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.owners)

    def __bool__(self) -> bool:
        return bool(self.owners)

    def summary(self, key: int) -> str:
        """The summary of the owners whose key is ``key`` (made once)."""
        made = self._summaries.get(key)
        if made is None:
            if self.matches is None and self.text is not None:
                self.matches = quoting(*self.text)
            made = self._summaries[key] = summary_of(self.keys[key], self.keywords, self.matches)
        return made

    def __iter__(self) -> Iterator[Aci]:
        base = page_key(self.uri, self.docbase)
        expired = self.expired or itertools.repeat(False)
        for owner, relevance, key, urgent, gone in zip(self.owners, self.relevance, self.key, self.urgent, expired,
                                                      strict=False):  # expired may be endless
            yield Aci(owner=owner, uri=self.uri, relevance=relevance, updatetime=self.updatetime,
                      filesize=self.filesize, version=self.version, docbase=self.docbase, summary=self.summary(key),
                      urgent=urgent, expired=gone, format=self.format, extension=self.extension, title=self.title,
                      id=base + owner_key(owner))

    @classmethod
    def of(cls, acis: Sequence[Aci]) -> list[PageAcis]:
        """``acis`` (any pages) as one PageAcis per page version, each ACI's summary as it is
        (for stores given plain ACIs)."""
        pages: dict[tuple, PageAcis] = {}
        for a in acis:
            fields = (a.uri, a.docbase, a.version, a.updatetime, a.filesize, a.format, a.extension, a.title)
            page = pages.get(fields[:2])
            if page is None:
                page = pages[fields[:2]] = cls(*fields, [], [], [], [], [], [], [])
            page.keys.append(a.summary)
            page.owners.append(a.owner)
            page.relevance.append(a.relevance)
            page.key.append(len(page.keys) - 1)
            page.urgent.append(a.urgent)
            page.expired.append(a.expired)
        return list(pages.values())


class Keys(Sequence):
    """Distinct lists of keyword indexes (the keys a page's summaries are made from) as one
    flat array and where each list starts: a page's 700 keys are two arrays, not 700 tuples.
    ``keys[i]`` is list ``i`` as a tuple, made when asked for."""

    __slots__ = ("flat", "starts")

    def __init__(self, flat: Any, starts: Any) -> None:
        self.flat = np.asarray(flat, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)  # one more than lists: where each starts, then the end

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return tuple(self.flat[self.starts[i]:self.starts[i + 1]].tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Keys({list(self)!r})"

    def shifted(self, by: int) -> Keys:
        """The same lists, every index ``by`` more (after another page's keywords)."""
        return Keys(self.flat + by, self.starts)

    def __add__(self, other: Keys) -> Keys:
        return Keys(np.concatenate((self.flat, other.flat)),
                    np.concatenate((self.starts[:-1], other.starts + len(self.flat))))

    def to_json(self) -> str:
        return json.dumps({"flat": self.flat.tolist(), "starts": self.starts.tolist()})

    @classmethod
    def from_json(cls, value: dict) -> Keys:
        return cls(value["flat"], value["starts"])


def quoting(text: str, reading: str | None) -> Any:
    """What summaries of a page are made from (a :class:`webrace.annotation.matcher.Matches`
    of its texts)."""
    return Matches(text, reading=reading)  # a few keywords searched for; beyond, one pass (see Matches)


def summary_of(key: Sequence[int] | str, keywords: Sequence[str], matches: Any) -> str:
    """The summary a key of a :class:`PageAcis` stands for (``matches``: see :func:`quoting`)."""
    if isinstance(key, str):
        return key
    if matches is None:
        return ""
    return summary(matches, [keywords[i] for i in key])


def _xml_safe(text: str) -> str:
    """Page text may hold characters XML 1.0 cannot (control characters): drop them (one
    regular expression: this runs for every ACI of every owner of a page)."""
    return _NOT_XML.sub("", text)


_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd]")


def extension_of(url: str, media_type: str) -> tuple[str, str]:
    """(extension, format) of a page, from its URL and media type: ``("html", "html")``."""
    ext = posixpath.splitext(urlsplit(url).path)[1].lstrip(".").lower()
    fmt = {"text/html": "html", "application/xhtml+xml": "xhtml", "text/plain": "text",
           "application/xml": "xml", "text/xml": "xml"}.get(media_type, media_type.split("/")[-1] or "html")
    return ext or fmt, fmt
