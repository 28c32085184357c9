"""The state-store interfaces components depend on (never on SQLite or Redis directly)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from webrace.records.aci import Aci
from webrace.records.metainfo import MetaInfo, Revisit, Version
from webrace.urd import Urd


class UrdStore(ABC):
    """URD-DB: the standing requests, keyed by URD id."""

    @abstractmethod
    def put_many(self, urds: Iterable[Urd]) -> None:
        """Store every URD in one transaction; an id already present is replaced."""

    @abstractmethod
    def remove(self, ids: Iterable[str]) -> list[str]:
        """Remove these ids; return the ones that existed."""

    @abstractmethod
    def get(self, urd_id: str) -> Urd | None: ...

    @abstractmethod
    def all(self) -> list[Urd]:
        """Every URD, ordered by id."""

    @abstractmethod
    def due(self, now_ms: int) -> list[Urd]:
        """URDs with ``lastcheck + timing <= now_ms`` (never checked = due), soonest first."""

    def next_due(self) -> int | None:
        """When the soonest URD falls due (None: no URD registered)."""
        return min((u.next_due for u in self.all()), default=None)

    @abstractmethod
    def mark_checked(self, ids: Iterable[str], at_ms: int) -> None:
        """Set ``lastcheck`` of these URDs to ``at_ms``, the time their round opened, and their
        next due time from it, unless `make_due` asked for them after ``at_ms``: that
        request stands (the next round takes them)."""

    @abstractmethod
    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]:
        """Make these URDs (all when ``ids`` is None) due at ``at_ms`` without touching their
        last check; return the ids that exist."""

    @abstractmethod
    def reclock(self, now_ms: int) -> int:
        """The wall clock stepped back (:mod:`webrace.clock`): make due at ``now_ms`` the URDs
        whose last check is after it (not yet due: their next due time was stretched by the
        step), touching no other; return how many. One bounded query."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> UrdStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MetaInfoStore(ABC):
    """The object cache's index and meta-info store: one meta-info record per URL and the
    list of its stored versions."""

    @abstractmethod
    def get(self, url: str) -> MetaInfo | None: ...

    def get_recent(self, url: str) -> MetaInfo | None:
        """:meth:`get` of a record this store may have written moments ago (a store may answer
        from what it kept of that write)."""
        return self.get(url)

    def get_many(self, urls: list[str]) -> list[MetaInfo | None]:
        """:meth:`get` of each URL (a store over the network answers them in one round trip)."""
        return [self.get(url) for url in urls]

    @abstractmethod
    def put(self, meta: MetaInfo, new_version: Version | None = None) -> None:
        """Replace the URL's record and add ``new_version``, in one transaction."""

    @abstractmethod
    def versions(self, url: str) -> list[Version]:
        """The URL's stored versions, oldest first."""

    @abstractmethod
    def add_revisit(self, revisit: Revisit, keep: int) -> None:
        """Record a 304 answer; keep only the URL's newest ``keep`` of them."""

    @abstractmethod
    def revisits(self, url: str) -> list[Revisit]:
        """The URL's recorded 304 answers, oldest first."""

    def want(self, url: str, keys: Iterable[str]) -> MetaInfo | None:
        """Add reach keys to the URL's ``wanted`` as one read-modify-write (a drop or a fetch
        of the page in between is not undone); the record as it now is (None: there is none)."""
        meta = self.get(url)
        if meta is None:
            return None
        wanted = meta.wanting(keys)
        if wanted == meta.wanted:
            return meta
        meta = replace(meta, wanted=wanted)
        self.put(meta)
        return meta

    def announced(self, pages: Iterable[tuple[str, int]]) -> int:
        """Each (URL, version) of ``pages`` went out in its page's item: its record is no
        longer :attr:`~webrace.records.metainfo.MetaInfo.unannounced` (unless a newer version
        replaced it meanwhile); how many records changed. One read-modify-write each."""
        done = 0
        for url, version in pages:
            meta = self.get(url)
            if meta is not None and meta.unannounced and meta.version == version:
                self.put(replace(meta, unannounced=False))
                done += 1
        return done

    def confirm(self, meta: MetaInfo, revisit: Revisit | None, keep: int) -> None:
        """A 304: replace the URL's record (its ``checked`` time moved) and record ``revisit``
        (keeping the newest ``keep``); a store may do both in one write."""
        self.put(meta)
        if revisit is not None:
            self.add_revisit(revisit, keep)

    @abstractmethod
    def urls(self) -> list[str]: ...

    @abstractmethod
    def prune(self, keep: int, protected: set[str] = frozenset()) -> list[Version]:
        """Drop all but the newest ``keep`` versions of every URL, never one whose digest is
        in ``protected``; return the dropped versions."""

    @abstractmethod
    def referenced_digests(self) -> set[str]:
        """Digests some version still points to."""

    @abstractmethod
    def drop_version(self, expected: MetaInfo, meta: MetaInfo, version: Version) -> bool | None:
        """If the URL's record is still ``expected``: replace it with ``meta`` and remove
        ``version``, in one transaction, and return whether another version still points to
        its digest. None (and nothing changed) when the record is no longer ``expected``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class AciStore(ABC):
    """The ACIs made for each owner, and which of them were delivered (acknowledged)."""

    def __enter__(self) -> AciStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def add(self, acis: Iterable[Aci]) -> int:
        """Keep these ACIs (one per owner, page and version: a repeat is ignored); return how
        many were new."""

    def add_pages(self, pages: list[Any]) -> list[int | Exception]:
        """Each page's ACIs kept (all or none per page); per page how many were new, or the
        error that refused it. A store may write them together (the embedded one does: one
        transaction)."""
        out: list[int | Exception] = []
        for page in pages:
            try:
                out.append(self.add(page))
            except Exception as exc:  # that page refused: the others are still kept
                out.append(exc)
        return out

    @abstractmethod
    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        """The owner's ACIs updated at or after ``since`` (epoch ms), newest first."""

    @abstractmethod
    def get(self, aci_id: str) -> Aci | None: ...

    @abstractmethod
    def owners(self) -> list[str]:
        """Every owner with at least one ACI, sorted."""

    @abstractmethod
    def ack(self, owner: str, ids: Iterable[str] | None = None) -> int:
        """Mark the owner's ACIs (all when ``ids`` is None) delivered; return how many."""

    @abstractmethod
    def undelivered_digests(self) -> set[str]:
        """Stored bodies an undelivered ACI points to: `store gc` must keep them."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


SESSION = ""  # the URL under which results of a rule's close() are recorded (seq 0)


class ResultsStore(ABC):
    """Scout's results table: each rule's results per document, keyed by rule name and URL,
    kept across crawls. Documents get a sequence number (1, 2, ...) the first time any rule
    records a result for them, the same for every rule and every later crawl."""

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def seq(self, url: str) -> int:
        """The document's sequence number, assigned on first use."""

    @abstractmethod
    def put(self, rule: str, url: str, seq: int, results: list, at_ms: int) -> None:
        """Record (replace) ``rule``'s results for the document."""

    @abstractmethod
    def get(self, rule: str, url: str) -> list | None:
        """``rule``'s results for ``url``; None when it has recorded none."""

    @abstractmethod
    def rows(self, rule: str | None = None) -> Iterator[tuple[str, str, int, list]]:
        """(rule, url, seq, results) of ``rule`` (or every rule), by rule then seq."""

    @abstractmethod
    def rules(self) -> list[str]:
        """Names of the rules with recorded results, sorted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class SentinelStore(ABC):
    """Sentinels, the page digests they last saw (by the digest's SHA-256), and the
    notifications they gave each owner."""

    def __enter__(self) -> SentinelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def add(self, sentinels: Iterable[Any]) -> list[str]:
        """Keep these sentinels (an id already present is replaced, its history kept);
        return their ids. New ones are due now."""

    @abstractmethod
    def remove(self, ids: Iterable[str]) -> list[str]: ...

    @abstractmethod
    def all(self, owner: str | None = None) -> list[tuple[Any, int, str | None]]:
        """(sentinel, next due epoch ms, SHA-256 of the digest it last saw), by URL then id."""

    @abstractmethod
    def due(self, now_ms: int) -> list[tuple[Any, str | None]]:
        """(sentinel, last seen digest) of the sentinels due at ``now_ms``."""

    @abstractmethod
    def watching(self, url: str) -> list[tuple[Any, str | None]]:
        """(sentinel, last seen digest) of every sentinel on ``url``, due or not: a new
        version of the page is evaluated for all of them, whichever round fetched it."""

    @abstractmethod
    def make_due(self, ids: Iterable[str] | None, at_ms: int) -> list[str]: ...

    @abstractmethod
    def reclock(self, now_ms: int) -> int:
        """The wall clock stepped back (:mod:`webrace.clock`): make due at ``now_ms`` (as
        :meth:`make_due` does) the sentinels whose next due time is further from it than their
        own interval, touching no other; return how many."""

    @abstractmethod
    def checked(self, ids: Iterable[str], at_ms: int, seen: str | None = None) -> None:
        """These sentinels were evaluated at ``at_ms`` (next due: ``at_ms + every``); with
        ``seen``, the digest they now compare against."""

    @abstractmethod
    def advance(self, expected: Mapping[str, str | None], at_ms: int, seen: str, data: bytes,
                notes: Iterable[Any]) -> list[str]:
        """An evaluation's outcome, as one compare-and-set: keep digest ``data`` (SHA-256
        ``seen``), and for each sentinel id whose baseline is still ``expected[id]`` (None:
        it had none) move it to ``seen`` (next due ``at_ms + every``) and keep its ``notes``.
        A sentinel another evaluation of the same change moved first is left alone, and its
        notes dropped: one change, one notification, however many workers fetched the page.
        Returns the ids moved."""

    @abstractmethod
    def put_digest(self, sha: str, data: bytes) -> None: ...

    @abstractmethod
    def get_digest(self, sha: str) -> bytes | None: ...

    @abstractmethod
    def gc_digests(self) -> int:
        """Delete digests no sentinel compares against; return how many."""

    @abstractmethod
    def add_notifications(self, notes: Iterable[Any]) -> int: ...

    @abstractmethod
    def notifications(self, owner: str, since: int = 0) -> list[dict]:
        """The owner's notifications (as dicts), newest first."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass
