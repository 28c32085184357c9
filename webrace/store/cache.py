"""The object cache: index + meta-info store + object store (seed 000 section 5).

Writing a fetch follows the seed's steps 5-7 in an order that survives a crash at any
point: the body is written to the object store first (atomically), then the meta-info
record and the new version row are committed together. A crash between the two leaves an
unreferenced object, which ``gc`` removes; the index never points at a missing object
because of a crash. A missing or damaged object found later is reported, and the URL is
fetched in full again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from webrace.records.metainfo import MetaInfo, Revisit, Version, VersionExists
from webrace.store.objects import CompressedObjects, ObjectMissing, digest_of, is_xml_type
from webrace.xpack import PackedDocument

if TYPE_CHECKING:
    from webrace.backends.base import MetaInfoStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    """What storing one fetch did."""

    meta: MetaInfo
    version: int | None  # number of the version now newest (None: no body stored)
    new_version: bool  # a new version was added
    unchanged: bool  # the body hashed to the newest stored version
    # reach keys of this fetch's URDs the page's record did not have: the version it holds was
    # never judged for them (another owner's round stored it; Redis lost the record's keys)
    newcomers: frozenset[str] = frozenset()

    @property
    def announce(self) -> bool:
        """Its page's item tells a new version: this fetch stored one, or an earlier fetch
        stored the version it found and its item never went out (``MetaInfo.unannounced``)."""
        return self.new_version or (self.meta.unannounced and self.version is not None)


@dataclass
class GcReport:
    versions_dropped: int = 0
    objects_deleted: int = 0
    bytes_freed: int = 0
    temporary_files: int = 0
    objects_young: int = 0  # unreferenced, but younger than the grace period: kept this time
    links: list[str] = field(default_factory=list)  # symbolic links in the store: skipped, never followed


class IndexLost(RuntimeError):
    """gc found objects but no meta-info at all: the index was lost (a Redis that came back
    empty, another data directory), so every body would look unreferenced."""


class ObjectCache:
    def __init__(self, index: MetaInfoStore, objects: CompressedObjects, revisits_kept: int = 50) -> None:
        self.index = index
        self.objects = objects
        self.revisits_kept = revisits_kept  # 304 answers kept per URL (WEBRACE_STORE_REVISITS)

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> ObjectCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the crawl's side ----------------------------------------------------------------

    def lookup(self, url: str, recent: bool = False) -> MetaInfo | None:
        """The URL's meta-info; ``recent``: just stored by this process (read back for
        annotation), so the store may answer from what it kept of the write."""
        return self.index.get_recent(url) if recent else self.index.get(url)

    def check(self, meta: MetaInfo) -> str | None:
        """Why the stored body of ``meta`` cannot be trusted (``missing``/``corrupt``), or None."""
        if not meta.digest or meta.dropped:  # a dropped body is not expected to be there
            return None
        try:
            return None if self.objects.intact(meta.digest, meta.objcrc) else "corrupt"
        except ObjectMissing:
            return "missing"

    def record_fetch(
        self,
        url: str,
        status: int,
        body: bytes,
        *,
        fetched: int,
        header: str,
        links: list[str],
        ip: str | None = None,
        etag: str | None = None,
        lastmodified: str | None = None,
        store_body: bool = True,
        previous: MetaInfo | None | object = ...,
        wanted: Iterable[str] = (),
        checked: int | None = None,
        refresh: str | None = None,
        announce: bool = True,
    ) -> Recorded:
        """Store a full response. A 2xx body becomes a new version unless it hashes to the
        newest one; other statuses update the record and keep the versions. ``previous``
        is the URL's record if the caller just read it (None: there was none); ``wanted``:
        reach keys of the URDs this fetch was for, added to the page's; ``checked``: when the
        round that fetched it opened (see ``MetaInfo.checked``); ``refresh``: where the page's
        refresh sends the browser (kept in its meta-info); ``announce``: a new version is
        :attr:`~webrace.records.metainfo.MetaInfo.unannounced` until its page's item is out
        (False: history imported, never news).

        Two fetches of one URL recorded at once (a page reached by two routes in flight
        together) would both number their version after the same newest one: the second is
        recorded again against what the first stored."""
        args = (url, status, body, fetched, header, links, ip, etag, lastmodified, store_body, wanted, checked,
                refresh, announce)
        try:
            return self._record_fetch(*args, previous)
        except VersionExists:
            logger.info("%s was recorded by another fetch meanwhile: recorded against it", url)
            return self._record_fetch(*args, ...)

    def _record_fetch(self, url: str, status: int, body: bytes, fetched: int, header: str, links: list[str],
                      ip: str | None, etag: str | None, lastmodified: str | None, store_body: bool,
                      wanted: Iterable[str], checked: int | None, refresh: str | None, announce: bool,
                      previous: MetaInfo | None | object) -> Recorded:
        if previous is ...:
            previous = self.index.get(url)
        keys = previous.wanting(wanted) if previous is not None else tuple(dict.fromkeys(wanted))
        newcomers = frozenset(wanted) - set(previous.wanted) if previous is not None else frozenset()
        if previous is not None and previous.version is not None and previous.digest:
            newest: Version | None = Version(url, previous.version, previous.digest, previous.fetched,
                                             previous.size, previous.status)
        else:
            versions = self.index.versions(url) if previous else []
            newest = versions[-1] if versions else None
        # a version stored earlier whose item never went out stays to be announced
        pending = bool(previous is not None and previous.unannounced and newest is not None
                       and previous.version == newest.number)
        if not (200 <= status < 300 and store_body):
            meta = MetaInfo(url, status, fetched, header, tuple(links), ip, size=newest.size if newest else 0,
                            digest=newest.digest if newest else None, version=newest.number if newest else None,
                            objcrc=previous.objcrc if previous and newest else None,
                            dropped=bool(previous and newest and previous.dropped), wanted=keys,
                            refresh=refresh, unannounced=pending)
            # (not checked: a body this fetch did not bring is not confirmed by it)
            self.index.put(meta)  # no validators: next time, fetch in full
            return Recorded(meta, newest.number if newest else None, False, False, newcomers)
        digest = digest_of(body)
        meta = MetaInfo(url, status, fetched, header, tuple(links), ip, size=len(body),
                        lastmodified=lastmodified, etag=etag, digest=digest, wanted=keys, checked=checked,
                        refresh=refresh, unannounced=pending)
        xml = is_xml_type(meta.header_value("Content-Type"))
        if newest is not None and newest.digest == digest:
            if previous is not None and previous.dropped:  # still the body nobody wanted: not kept
                meta = replace(meta, version=newest.number, dropped=True)
                self.index.put(meta)
                return Recorded(meta, newest.number, False, True, newcomers)
            _, _, crc = self.objects.put(body, digest, repair=True, xml=xml)  # the stored copy may be damaged
            meta = replace(meta, version=newest.number, objcrc=crc)
            self.index.put(meta)
            return Recorded(meta, newest.number, False, True, newcomers)
        _, _, crc = self.objects.put(body, digest, xml=xml)
        version = Version(url, (newest.number + 1) if newest else 1, digest, fetched, len(body), status, header)
        meta = replace(meta, version=version.number, objcrc=crc, unannounced=announce)  # until its item is out
        self.index.put(meta, version)
        return Recorded(meta, version.number, True, False)

    def record_not_kept(self, url: str, status: int, *, fetched: int, header: str, ip: str | None = None,
                        etag: str | None = None, lastmodified: str | None = None) -> MetaInfo:
        """A 2xx answer of a media type the crawl does not keep (:attr:`MetaInfo.not_kept`):
        its headers and validators, no body, so a re-crawl asks "has this changed?" instead
        of downloading it again. Versions stored before (the URL served a kept type) stay."""
        meta = MetaInfo(url, status, fetched, header, (), ip, lastmodified=lastmodified, etag=etag)
        self.index.put(meta)
        return meta

    def record_not_modified(self, meta: MetaInfo, fetched: int, etag: str | None, lastmodified: str | None,
                            header: str | None = None, wanted: Iterable[str] = (),
                            checked: int | None = None) -> MetaInfo:
        """A 304: no body is stored (the seed's altered step 3); the answer is logged as a
        :class:`Revisit` of the version it confirmed (a WARC ``revisit`` record on export;
        the newest ``revisits_kept`` per URL), and the validators are updated if the 304
        refreshed them. ``fetched`` of the meta-info stays the time of the last full fetch;
        ``wanted`` and ``checked`` as in :meth:`record_fetch`."""
        if checked is not None and meta.checked is not None:
            checked = max(checked, meta.checked)  # a later round confirmed it already
        updated = replace(meta.revalidated(etag, lastmodified), checked=meta.checked if checked is None else checked,
                          wanted=meta.wanting(wanted))
        revisit = None
        if meta.version is not None and meta.digest and not meta.dropped and self.revisits_kept > 0:
            revisit = Revisit(meta.url, fetched, meta.version, meta.digest, header)
        self.index.confirm(updated, revisit, self.revisits_kept)
        return updated

    def want(self, url: str, wanted: Iterable[str]) -> MetaInfo | None:
        """Add the reach keys of URDs a page served to its record: a page served without a
        request (confirmed lately), or URDs merged into it after its fetch. One
        read-modify-write in the index (a drop or fetch in between is not undone)."""
        return self.index.want(url, wanted)

    def drop(self, meta: MetaInfo) -> bool:
        """Do not keep the body of ``meta``'s newest version (it was relevant to no owner):
        the version is removed, the meta-info stays with its digest and validators (so the
        next re-crawl is still conditional, and an unchanged body is recognised), marked
        ``dropped``. The object is deleted unless another version still points to it.
        Nothing happens when the URL's record is no longer ``meta`` (a newer fetch won)."""
        if meta.version is None or not meta.digest or meta.dropped:
            return False
        version = Version(meta.url, meta.version, meta.digest, meta.fetched, meta.size, meta.status)
        referenced = self.index.drop_version(meta, replace(meta, dropped=True, objcrc=None), version)
        if referenced is None:
            return False
        if not referenced:  # index first, object second: a crash leaves garbage, never a dangling version
            self.objects.delete(meta.digest)
        return True

    def forget_validators(self, meta: MetaInfo) -> None:
        """Make the next request for this URL unconditional (its stored body is unusable)."""
        self.index.put(replace(meta, etag=None, lastmodified=None))

    # -- reading back --------------------------------------------------------------------

    def versions(self, url: str) -> list[Version]:
        return self.index.versions(url)

    def revisits(self, url: str) -> list[Revisit]:
        """The URL's 304 answers, oldest first."""
        return self.index.revisits(url)

    def get(self, url: str, number: int | None = None) -> tuple[Version, bytes]:
        """The body of version ``number`` of ``url`` (default: the newest). Raises
        LookupError when there is no such version, ObjectCorrupt when it is damaged."""
        version = self._version(url, number)
        return version, self.objects.get(version.digest)

    def _version(self, url: str, number: int | None) -> Version:
        versions = self.index.versions(url)
        if not versions:
            raise LookupError(f"no stored version of {url}")
        if number is None:
            return versions[-1]
        matches = [v for v in versions if v.number == number]
        if not matches:
            have = ", ".join(str(v.number) for v in versions)
            raise LookupError(f"{url} has no version {number} (stored: {have})")
        return matches[0]

    def packed(self, url: str, number: int | None = None) -> tuple[Version, PackedDocument | None]:
        """Version ``number`` of ``url`` (default: the newest) as an XPack document when it
        is stored XPack-encoded (else None), without decompressing it. Raises as :meth:`get`."""
        version = self._version(url, number)
        return version, self.objects.packed(version.digest)

    def gc(self, keep: int, protected: set[str] = frozenset(), grace: float = 0.0, force: bool = False) -> GcReport:
        """Drop versions beyond the newest ``keep`` per URL (never a protected digest), then
        every object no version points to, and temporary files of interrupted writes. A
        symbolic link in the store is listed in the report and left alone: nothing is read
        or deleted through it.

        ``grace`` (seconds): objects and temporary files younger than that are spared, so a
        gc may run while workers crawl (a body is written before the version that points to
        it, and an existing body is re-dated when a new version is about to point to it).
        Raises :class:`IndexLost`, deleting nothing, when the index is empty but objects are
        stored, unless ``force``."""
        started = time.time()
        if not force and not self.index.urls() and next(iter(self.objects.digests()), None) is not None:
            raise IndexLost("the meta-info index is empty but the object store holds bodies: the index was "
                            "lost (a Redis that came back empty?) or belongs to another store; nothing deleted "
                            "(--force deletes every body)")
        report = GcReport(links=self.objects.links())
        report.versions_dropped = len(self.index.prune(keep, protected))
        referenced = self.index.referenced_digests() | set(protected)
        for digest in list(self.objects.digests()):
            if digest in referenced:
                continue
            stored = self.objects.mtime(digest)
            if stored is not None and stored > started - grace:
                report.objects_young += 1
                continue
            report.bytes_freed += self.objects.delete(digest)
            report.objects_deleted += 1
        report.temporary_files = self.objects.sweep(grace)
        return report
