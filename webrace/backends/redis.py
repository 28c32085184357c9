"""Distributed state stores: Redis, every key under ``WEBRACE_REDIS_PREFIX``.

The client is scrapy-redis's (built from the settings, ``REDIS_PARAMS`` included); the mode
and the URL are the factory's (``webrace.backends``). A password in the URL never reaches a
log or a message.

Keys (``P`` is the prefix, default ``webrace:``):

- ``P url:<URL>``         string: the URL's meta-info, versions and last 304 answers, compact
                          JSON, raw-deflated (``RedisMetaInfoStore``); its header and links are
                          a small object in the object store
- bodies                  not in Redis: in the object store (``WEBRACE_OBJECT_STORE``, default a
                          directory every worker mounts, ``WEBRACE_OBJECTS_DIR``); with
                          ``RedisObjectStore`` chosen, ``P object:<sha256>`` strings
- ``P objects:id``        string: the id of the object store the workers share (a worker that
                          mounted another directory is refused)
- ``P aci`` / ``P aci:owner:<owner>`` / ``P aci:undelivered``  the ACI store (``RedisAciStore``)
- ``P results:doc`` / ``P results:rule:<name>`` / ``P results:rules``  Scout's results table
- ``P round:<id>:...``    a round's URDs and shared frontier (``webrace.distributed``)
"""

from __future__ import annotations

import base64
import json
import logging
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import redis
from scrapy_redis.connection import get_redis_from_settings

from webrace.backends.base import AciStore, Cursor, MetaInfoStore, ResultsStore, Version
from webrace.backends.errors import RedisUnavailable, RedisUnreachable
from webrace.records.aci import Aci
from webrace.records.metainfo import MetaInfo, Revisit, VersionExists, with_wanted
from webrace.store.objects import CompressedObjects, ObjectCorrupt, ObjectMissing, digest_of

logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "webrace:"


# The user information of a URL (``user:password@``), and query parameters that carry a
# secret (``password=``, ``ssl_password=``, ``token=``...).
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@")
_SECRET_PARAM = re.compile(r"([?&;][^=&;#]*(?:pass|secret|token|auth)[^=&;#]*=)([^&;#]*)", re.IGNORECASE)


def safe_url(url: str) -> str:
    """``url`` with every password hidden: ``redis://user:secret@host:6379/0`` ->
    ``redis://user:***@host:6379/0``, ``redis://host/0?password=secret`` ->
    ``redis://host/0?password=***``. Works on URLs that do not parse, too."""
    def userinfo(match: re.Match) -> str:
        user, colon, _ = match.group(2).partition(":")
        return f"{match.group(1)}{user}:***@" if colon else f"{match.group(1)}***@"

    return _SECRET_PARAM.sub(r"\1***", _USERINFO.sub(userinfo, url))


def _secrets(url: str) -> list[str]:
    """The passwords ``url`` holds, as written in it."""
    found = [m.group(2) for m in _SECRET_PARAM.finditer(url)]
    if match := _USERINFO.match(url):
        user, colon, password = match.group(2).partition(":")
        found.append(password if colon else user)
    return [s for s in found if s]


def _one_line(exc: BaseException, url: str) -> str:
    """``exc``'s message on one line, without a password of ``url`` (in case it repeats it)."""
    text = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
    for secret in _secrets(url):
        text = text.replace(secret, "***")
    return text


def connect_url(url: str, settings: Any) -> redis.Redis:
    """A client for ``url`` (the factory's ``webrace.backends.connect`` passes the configured
    one; scrapy-redis builds the client from the settings, ``REDIS_PARAMS`` included), checked
    with a PING; :class:`RedisUnavailable` if the URL is not a Redis URL (a bad port, no
    scheme) or the server cannot be reached."""
    shown = safe_url(url) if url else "the REDIS_HOST/REDIS_PORT settings"
    try:
        client = get_redis_from_settings(settings)
        client.ping()
    except (ValueError, TypeError) as exc:
        raise RedisUnavailable(
            f"REDIS_URL {shown} is not a Redis URL: {_one_line(exc, url)}. Expected "
            "redis://[USER:PASSWORD@]HOST[:PORT][/DB] (a port from 1 to 65535), rediss://... or unix://PATH."
        ) from None
    except (redis.exceptions.RedisError, OSError) as exc:
        # refused, reset, timed out, loading: it may answer later; a wrong password or an
        # answer that is no Redis's will not
        away = isinstance(exc, OSError | redis.exceptions.ConnectionError | redis.exceptions.TimeoutError) \
            and not isinstance(exc, redis.exceptions.AuthenticationError)
        raise (RedisUnreachable if away else RedisUnavailable)(
            f"Cannot reach Redis at {shown}: {_one_line(exc, url)}. "
            "Start it, fix REDIS_URL, or unset REDIS_URL to run embedded."
        ) from None
    return client


def prefix(settings: Any) -> str:
    return settings.get("WEBRACE_REDIS_PREFIX") or DEFAULT_PREFIX


class RedisMetaInfoStore(MetaInfoStore):
    """The meta-info index in Redis, one key per URL (``P url:<URL>``, so a Redis Cluster can
    spread them): a compact JSON record (deflated) of the seed's meta-info fields, the URL's versions and
    its last 304 answers. What can be long (the response header, the page's links) is not
    kept in Redis: beyond ``INLINE_SIDE`` bytes it goes to the object store as a small
    content-addressed object per fetch (its digest in the record), so Redis holds a few
    hundred bytes per page however long the page's header and link list are. Shorter ones
    stay in the record (a file costs the disk more than they cost Redis), as they all do
    without an object store (``objects=None``).

    Records are updated with optimistic transactions (WATCH/MULTI), one key each. Whether an
    object is still pointed to is not counted here (a count shared by every worker would race
    with a worker about to point at the same body): :meth:`drop_version` answers that it may
    be, and ``store gc`` removes what no version points to."""

    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX,
                 objects: CompressedObjects | None = None) -> None:
        self.client = client
        self.prefix = key_prefix
        self.url_prefix = f"{key_prefix}url:"
        self.objects = objects
        # The raw record of each URL read lately: an update compares-and-sets against it in one
        # round trip (a script) instead of WATCH, GET and MULTI/SET/EXEC; a stale one only costs
        # a retry against what Redis holds (the crawl reads a page's record before it stores it)
        self._read: dict[str, bytes | None] = {}
        # Side objects written lately, by digest: content-addressed, so never stale; the page's
        # record is read back moments later (annotation: get_recent) without reading its side
        # object again. Lookups for requests (get) read the object: a lost one is noticed
        self._sides: dict[str, tuple[str, list[str]]] = {}
        self._cas = client.register_script(_CAS)

    def _key(self, url: str) -> str:
        return self.url_prefix + url

    # -- records ---------------------------------------------------------------------------

    def _side(self, header: str, links: Iterable[str], write: bool) -> str | None:
        """The digest of the object holding ``header`` and ``links`` (stored when ``write``);
        None when they stay in the record: there is no object store, or they are small
        (at most ``INLINE_SIDE`` bytes as JSON, like a TOAST threshold: a file per page costs
        the disk an inode and two directory entries, more than a few hundred deflated bytes
        cost Redis)."""
        if self.objects is None:
            return None
        data = json.dumps({"header": header, "links": list(links)}, separators=(",", ":"),
                          ensure_ascii=False).encode()
        if len(data) <= INLINE_SIDE:
            return None
        if not write:
            return digest_of(data)
        # not fsynced: a side object lost in a crash reads as unreadable, the page is fetched in full
        # and its side written again
        digest = self.objects.put(data, repair=True, durable=False)[0]
        if len(self._sides) >= _SIDES_KEPT:
            self._sides.clear()  # bounded (at once: several threads share it)
        self._sides[digest] = (header, list(links))
        return digest

    def _read_side(self, digest: str, recent: bool = False) -> tuple[str, list[str]] | None:
        kept = self._sides.get(digest) if recent else None
        if kept is not None:
            return kept[0], list(kept[1])
        try:
            side = json.loads(self.objects.get(digest))
            return side["header"], side["links"]
        except (ObjectMissing, ObjectCorrupt, ValueError, KeyError, TypeError, OSError) as exc:
            logger.warning("Meta-info side object %s unreadable (%s): the page will be fetched in full",
                           digest, type(exc).__name__)
            return None

    def _meta_record(self, meta: MetaInfo, write: bool) -> dict[str, Any]:
        record: dict[str, Any] = {"s": meta.status, "f": meta.fetched, "z": meta.size}
        for key, value in (("i", meta.ip), ("lm", meta.lastmodified), ("e", meta.etag), ("d", _b64(meta.digest)),
                           ("n", meta.version), ("c", meta.objcrc)):
            if value is not None:
                record[key] = value
        if meta.dropped:
            record["x"] = 1
        if meta.checked is not None:
            record["k"] = meta.checked
        if meta.wanted:
            record["w"] = " ".join(meta.wanted)
        if meta.refresh:
            record["rf"] = meta.refresh
        if meta.unannounced:
            record["u"] = 1
        side = self._side(meta.header, meta.links, write)
        if side is None:
            record["H"], record["L"] = meta.header, list(meta.links)
        else:
            record["h"] = _b64(side)
        return record

    def _meta(self, url: str, r: dict[str, Any], recent: bool = False) -> MetaInfo:
        header, links, etag, lastmodified = r.get("H", ""), r.get("L", []), r.get("e"), r.get("lm")
        if "h" in r:
            side = self._read_side(_hex(r["h"]), recent)
            if side is None:  # no header: no validators either, so the next request is unconditional
                header, links, etag, lastmodified = "", [], None, None
            else:
                header, links = side
        return MetaInfo(url, r["s"], r["f"], header, tuple(links), r.get("i"), size=r["z"],
                        lastmodified=lastmodified, etag=etag, digest=_hex(r.get("d")), version=r.get("n"),
                        objcrc=r.get("c"), dropped=bool(r.get("x")), checked=r.get("k"),
                        wanted=tuple(r.get("w", "").split()), refresh=r.get("rf"), unannounced=bool(r.get("u")))

    def _version_entry(self, v: Version, side: str | None = None) -> list[Any]:
        entry: list[Any] = [v.number, _b64(v.digest), v.fetched, v.size, v.status]
        if v.header is not None:
            side = side or _b64(self._side(v.header, (), write=True))
            entry.append(side if side is not None else {"H": v.header})
        return entry

    def _version(self, url: str, e: list[Any]) -> Version:
        header = None
        if len(e) > 5:
            if isinstance(e[5], dict):
                header = e[5].get("H")
            else:
                side = self._read_side(_hex(e[5]))
                header = side[0] if side else None
        return Version(url, e[0], _hex(e[1]), e[2], e[3], e[4], header)

    def _load(self, url: str) -> dict[str, Any] | None:
        raw = self.client.get(self._key(url))
        self._remember(url, raw)
        return _loads(raw) if raw else None

    def _remember(self, url: str, raw: bytes | None) -> None:
        if len(self._read) >= _READ_KEPT:  # bounded (cleared at once: several threads share it, and a
            self._read.clear()             # record not remembered only costs its update a GET)
        self._read[url] = raw

    def _update(self, url: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> bool:
        """Apply ``change`` to the URL's record atomically: compare-and-set against the
        record as read (lately, or now), retried with what Redis holds while another client
        writes the same key; ``change`` returns the new record, or None to leave it."""
        key = self._key(url)
        raw = self._read.pop(url, _UNREAD)
        for _ in range(_MAX_RETRIES):
            if raw is _UNREAD:
                raw = self.client.get(key)
            record = change(_loads(raw) if raw else None)
            if record is None:
                return False
            new = _dumps(record)
            answer = self._cas(keys=[key], args=[b"1" + raw if raw else b"0", new])
            if answer == 1:
                self._remember(url, new)
                return True
            raw = answer[1] if len(answer) > 1 else None  # what another writer left: the change again
        raise RuntimeError(f"meta-info of {url} changed {_MAX_RETRIES} times while being updated")

    # -- the interface ---------------------------------------------------------------------

    def get(self, url: str) -> MetaInfo | None:
        record = self._load(url)
        return self._meta(url, record["m"]) if record else None

    def get_recent(self, url: str) -> MetaInfo | None:
        """:meth:`get` of a record this store wrote lately: as it wrote it (no round trip; a
        write by another worker since is not seen), its side object from memory."""
        raw = self._read.get(url, _UNREAD)
        if raw is _UNREAD:
            return self.get(url)
        record = _loads(raw) if raw else None
        return self._meta(url, record["m"], recent=True) if record else None

    def get_many(self, urls: list[str]) -> list[MetaInfo | None]:
        """The records of ``urls`` in one round trip (a pipeline of GETs: one key each, so a
        Redis Cluster may hold them on different nodes)."""
        pipe = self.client.pipeline(transaction=False)
        for url in urls:
            pipe.get(self._key(url))
        found: list[MetaInfo | None] = []
        for url, raw in zip(urls, pipe.execute(), strict=True):
            self._remember(url, raw)
            record = _loads(raw) if raw else None
            found.append(self._meta(url, record["m"]) if record else None)
        return found

    def put(self, meta: MetaInfo, new_version: Version | None = None) -> None:
        m = self._meta_record(meta, write=True)  # side objects first: a crash leaves garbage, not a dangling record
        entry = None
        if new_version is not None:  # the version's fetch is usually the record's: one side object for both
            same = new_version.header == meta.header and "h" in m
            entry = self._version_entry(new_version, m["h"] if same else None)

        def change(record: dict[str, Any] | None) -> dict[str, Any]:
            record = record or {}
            if entry is not None and any(e[0] == entry[0] for e in record.get("v", [])):
                raise VersionExists(f"{meta.url} has a version {entry[0]} already")
            record["m"] = m
            if entry is not None:
                record.setdefault("v", []).append(entry)
            return record

        self._update(meta.url, change)

    def versions(self, url: str) -> list[Version]:
        record = self._load(url)
        return [self._version(url, e) for e in record.get("v", [])] if record else []

    def add_revisit(self, revisit: Revisit, keep: int) -> None:
        def change(record: dict[str, Any] | None) -> dict[str, Any] | None:
            if record is None:
                return None
            _revisited(record, revisit, keep)
            return record

        self._update(revisit.url, change)

    def want(self, url: str, keys: Iterable[str]) -> MetaInfo | None:
        """One compare-and-set of the record's ``w`` (the rest of it as another writer left it)."""
        keys = list(keys)

        def change(record: dict[str, Any] | None) -> dict[str, Any] | None:
            if not record or "m" not in record:
                return None
            have = tuple(record["m"].get("w", "").split())
            wanted = with_wanted(have, keys)
            if wanted == have:
                return None
            record["m"]["w"] = " ".join(wanted)
            return record

        self._update(url, change)
        return self.get_recent(url)

    def announced(self, pages: Iterable[tuple[str, int]]) -> int:
        """One compare-and-set per page (most records are remembered from their write: no GET)."""
        done = 0
        for url, version in pages:

            def change(record: dict[str, Any] | None, version: int = version) -> dict[str, Any] | None:
                m = record.get("m") if record else None
                if not m or not m.get("u") or m.get("n") != version:
                    return None
                del m["u"]
                return record

            done += self._update(url, change)
        return done

    def confirm(self, meta: MetaInfo, revisit: Revisit | None, keep: int) -> None:
        """One compare-and-set for the record and the 304's revisit."""
        m = self._meta_record(meta, write=True)

        def change(record: dict[str, Any] | None) -> dict[str, Any]:
            record = record or {}
            record["m"] = m
            if revisit is not None:
                _revisited(record, revisit, keep)
            return record

        self._update(meta.url, change)

    def revisits(self, url: str) -> list[Revisit]:
        record = self._load(url)
        if not record:
            return []
        digests = {e[0]: _hex(e[1]) for e in record.get("v", [])}
        return [Revisit(url, t, n, digests[n]) for t, n in record.get("r", []) if n in digests]

    def urls(self) -> list[str]:
        start = len(self.url_prefix)
        return sorted(_text(key)[start:] for key in self.client.scan_iter(match=_glob_escape(self.url_prefix) + "*",
                                                                           count=1000))

    def prune(self, keep: int, protected: set[str] = frozenset()) -> list[Version]:
        dropped: list[Version] = []
        for url in self.urls():
            old: list[Version] = []

            def change(record: dict[str, Any] | None, url: str = url, old: list[Version] = old) -> dict | None:
                old.clear()
                entries = (record or {}).get("v", [])
                cut = {e[0] for e in entries[: max(len(entries) - max(keep, 1), 0)] if _hex(e[1]) not in protected}
                if not cut:
                    return None
                old.extend(Version(url, e[0], _hex(e[1]), *e[2:5]) for e in entries if e[0] in cut)
                record["v"] = [e for e in entries if e[0] not in cut]
                record["r"] = [r for r in record.get("r", []) if r[1] not in cut]
                return record

            self._update(url, change)
            dropped.extend(old)
        return dropped

    def referenced_digests(self) -> set[str]:
        """Bodies a version points to, and the side objects of the records and versions."""
        found: set[str] = set()
        for url in self.urls():
            record = self._load(url)
            if not record:
                continue
            if "h" in record["m"]:
                found.add(_hex(record["m"]["h"]))
            for e in record.get("v", []):
                found.add(_hex(e[1]))
                if len(e) > 5 and isinstance(e[5], str):
                    found.add(_hex(e[5]))
        return found

    def drop_version(self, expected: MetaInfo, meta: MetaInfo, version: Version) -> bool | None:
        want = self._meta_record(expected, write=False)
        new = self._meta_record(meta, write=True)

        def change(record: dict[str, Any] | None) -> dict[str, Any] | None:
            if record is None or record["m"] != want:
                return None
            record["m"] = new
            record["v"] = [e for e in record.get("v", []) if e[0] != version.number]
            record["r"] = [r for r in record.get("r", []) if r[1] != version.number]
            return record

        # Whether another version still points to the body is not known here: "maybe", so
        # the body stays until gc finds it unreferenced (see the class docstring).
        return True if self._update(meta.url, change) else None


_MAX_RETRIES = 100
_READ_KEPT = 4096  # raw records remembered for a compare-and-set (per store)
_SIDES_KEPT = 1024  # side objects remembered after writing them (per store)
# Header and links of at most this many bytes (as JSON) stay in the record (deflated with it)
# instead of a side object: most of a small page's record then costs no file of its own
INLINE_SIDE = 1024
_UNREAD = object()

# Compare-and-set one meta-info record: ARGV[1] is "0" (expected absent) or "1" + the record
# expected; ARGV[2] the new record. 1 when set, else {0, what the key holds (absent: nothing)}.
_CAS = """
local current = redis.call('GET', KEYS[1])
local expected = ARGV[1]
if (current == false and expected == '0') or (current ~= false and expected == '1' .. current) then
  redis.call('SET', KEYS[1], ARGV[2])
  return 1
end
if current == false then return {0} end
return {0, current}
"""


def _revisited(record: dict[str, Any], revisit: Revisit, keep: int) -> None:
    revisits = record.get("r", []) + [[revisit.fetched, revisit.number]]
    record["r"] = revisits[-keep:] if keep > 0 else []


def legacy_layout(client: redis.Redis, key_prefix: str) -> bool:
    """Whether Redis holds meta-info in the layout before bodies left Redis (``P meta``)."""
    return bool(client.exists(f"{key_prefix}meta"))


def migrate_legacy(client: redis.Redis, key_prefix: str, index: RedisMetaInfoStore,
                   objects: CompressedObjects) -> tuple[int, int, int]:
    """Move the earlier layout (``P meta`` hash of meta-info XML, ``P versions:<URL>`` lists,
    ``P object:<sha256>`` bodies, ``P refs``) into the current one: bodies into ``objects``,
    one record per URL into ``index``. Each URL is written before its old keys are deleted,
    so an interrupted migration is resumed by running it again. Returns (URLs, versions,
    bodies moved); a body that is missing is counted out, its version kept (reads of it
    report it missing, as before)."""
    meta_key, old_objects = f"{key_prefix}meta", f"{key_prefix}object:"
    urls = versions = bodies = 0
    for url, xml in client.hscan_iter(meta_key, count=500):
        url = _text(url)
        meta = MetaInfo.from_xml(_text(xml))
        old = [json.loads(raw) for raw in client.lrange(f"{key_prefix}versions:{url}", 0, -1)]
        record = index._load(url) or {}
        have = {e[0] for e in record.get("v", [])}
        for r in old:
            data = client.get(old_objects + r["digest"])
            if data is not None and not objects.exists(r["digest"]):
                objects._write(r["digest"], data, replace=False)  # the stored bytes, as they were
                bodies += 1
            if r["n"] not in have:
                index.put(meta, Version(url, r["n"], r["digest"], r["fetched"], r["size"], r["status"]))
                versions += 1
        index.put(meta)
        client.delete(f"{key_prefix}versions:{url}")
        client.hdel(meta_key, url)
        urls += 1
    leftover = [key for key in client.scan_iter(match=_glob_escape(old_objects) + "*", count=1000)]
    for key in leftover:  # bodies no version pointed to any more
        client.delete(key)
    client.delete(f"{key_prefix}refs")
    return urls, versions, bodies


def _b64(digest: str | None) -> str | None:
    """A SHA-256 in hex (64 characters) as the record keeps it: base64url, 43 characters."""
    return base64.urlsafe_b64encode(bytes.fromhex(digest)).decode().rstrip("=") if digest else digest


def _hex(value: str | None) -> str | None:
    return base64.urlsafe_b64decode(value + "=").hex() if value else value


# The preset dictionary of records (zlib's zdict): what most records repeat (their JSON keys,
# common response headers as the record escapes them), so that a short header kept in the
# record costs a few bytes a line. NEVER CHANGE IT: every record written with it needs it to
# be read (tests/test_store_shared.py pins its SHA-256). Records written before it (plain raw
# deflate) read the same with it, as a preset dictionary only adds what a stream may refer to.
_RECORD_DICT = json.dumps([
    "Accept-Ranges: bytes", "Access-Control-Allow-Origin: *", "Age: ", "Alt-Svc: h3=\":443\"; ma=86400",
    "Connection: keep-alive", "Content-Encoding: gzip", "Content-Language: en", "Content-Security-Policy: ",
    "Expires: ", "Link: <https://", "Location: https://", "Pragma: no-cache", "Referrer-Policy: ",
    "Set-Cookie: ", "; path=/; HttpOnly; Secure; SameSite=Lax", "Transfer-Encoding: chunked",
    "Strict-Transport-Security: max-age=31536000; includeSubDomains", "Vary: Accept-Encoding",
    "X-Content-Type-Options: nosniff", "X-Frame-Options: SAMEORIGIN", "X-Xss-Protection: 1; mode=block",
    "Via: 1.1 varnish", "X-Cache: HIT", "Server: nginx", "Server: Apache", "Server: cloudflare",
    "application/json", "application/xml", "text/plain", "text/css", "charset=UTF-8",
    "HTTP/1.1 301 Moved Permanently", "HTTP/1.1 302 Found", "HTTP/1.1 404 Not Found",
    "HTTP/1.1 304 Not Modified", "Mon, Tue, Wed, Thu, Fri, Sat, Sun, ",
    "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec 20",
    "Cache-Control: max-age=0, no-cache, no-store, private, public, must-revalidate",
    '"Last-Modified: ', 'Etag: "W/', ".html", ".php", "index", "/\"],",
    {"m": {"s": 200, "f": 1, "z": 1, "i": "127.0.0.1", "lm": "", "e": "", "d": "", "n": 1, "c": 1,
           "H": "HTTP/1.1 200 OK\nServer: \nDate: \nEtag: \"\nLast-Modified: \nCache-Control: max-age=0"
                "\nContent-Type: text/html; charset=utf-8\nContent-Length: ",
           "L": ["https://www.", "http://"], "h": ""}, "v": [[1, "", 1, 1, 200, {"H": "HTTP/1.1 200 OK"}]]},
], separators=(",", ":")).encode()


def _dumps(record: dict[str, Any]) -> bytes:
    """A record as Redis keeps it: compact JSON, raw-deflated with a preset dictionary (the
    newest version repeats the record's digests and times, which deflate stores once: about
    230 bytes instead of 370)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=_RECORD_DICT)
    return packer.compress(json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()) + packer.flush()


def _loads(raw: bytes) -> dict[str, Any]:
    reader = zlib.decompressobj(-15, zdict=_RECORD_DICT)
    return json.loads(reader.decompress(raw) + reader.flush())


def _glob_escape(text: str) -> str:
    """``text`` matched literally in a SCAN MATCH pattern."""
    return re.sub(r"([\\*?\[\]])", r"\\\1", text)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisObjectStore(CompressedObjects):
    """Objects in Redis, under ``<prefix>object:<sha256>``, so that every worker on every
    machine reads what any worker stored. A SET is atomic: no half-written object.

    Not the default: Redis keeps its whole data set in memory, so bodies there bound the
    archive by the Redis machine's RAM. Choose it (``WEBRACE_OBJECT_STORE =
    "webrace.backends.redis.RedisObjectStore"``) for small crawls without a shared disk."""

    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX, level: int = 6) -> None:
        self.client = client
        self.prefix = f"{key_prefix}object:"
        self.level = level

    def __repr__(self) -> str:
        return f"RedisObjectStore({self.prefix!r})"

    def _load(self, digest: str) -> bytes:
        data = self.client.get(self.prefix + digest)
        if data is None:
            raise ObjectMissing(digest)
        return data

    def _write(self, digest: str, data: bytes, replace: bool, durable: bool = True) -> bool:
        return bool(self.client.set(self.prefix + digest, data, nx=not replace))

    def exists(self, digest: str) -> bool:
        return bool(self.client.exists(self.prefix + digest))

    def delete(self, digest: str) -> int:
        key = self.prefix + digest
        size = self.client.strlen(key)
        return size if self.client.delete(key) else 0

    def digests(self) -> Iterator[str]:
        for key in self.client.scan_iter(match=f"{self.prefix}*"):
            yield _text(key)[len(self.prefix):]

    def sweep(self, grace: float = 0.0) -> int:
        return 0  # nothing half-written can exist


class RedisAciStore(AciStore):
    """ACIs in Redis, so that workers on every machine add to one store:
    ``P aci`` (hash id -> ACI XML), ``P aci:owner:<owner>`` (sorted set of ids by update
    time), ``P aci:undelivered`` (hash id -> digest of the version it points to)."""

    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.key = f"{key_prefix}aci"
        self.owner_prefix = f"{key_prefix}aci:owner:"
        self.undelivered = f"{key_prefix}aci:undelivered"
        self._add = client.register_script(_ADD_ACI)

    def add(self, acis: Iterable[Aci]) -> int:
        """One script call for all of ``acis`` (a page's, for every owner): stored together
        or not at all, in one round trip."""
        acis = list(acis)
        if not acis:
            return 0
        args: list[Any] = []
        for a in acis:
            args += [a.id, a.to_xml(), a.updatetime, a.docbase]
        keys = [self.key, self.undelivered, *(self.owner_prefix + a.owner for a in acis)]
        return int(self._add(keys=keys, args=args))

    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        ids = self.client.zrangebyscore(self.owner_prefix + owner, since, "+inf")
        if not ids:
            return []
        acis = [Aci.from_xml(_text(x)) for x in self.client.hmget(self.key, ids) if x]
        return sorted((a for a in acis if a.relevance >= min_relevance), key=lambda a: (-a.updatetime, a.id))

    def page(self, owner: str, limit: int, after: Cursor | None = None, newer: bool = False) -> list[Aci]:
        """The owner's sorted set read at the cursor's rank (:func:`zset_page`), then those ACIs."""
        ids = zset_page(self.client, self.owner_prefix + owner, limit, after, newer)
        return [Aci.from_xml(_text(x)) for x in self.client.hmget(self.key, ids) if x] if ids else []

    def count(self, owner: str) -> int:
        return int(self.client.zcard(self.owner_prefix + owner))

    def get(self, aci_id: str) -> Aci | None:
        xml = self.client.hget(self.key, aci_id)
        return Aci.from_xml(_text(xml)) if xml else None

    def owners(self) -> list[str]:
        return sorted(_text(k)[len(self.owner_prefix):] for k in self.client.scan_iter(match=f"{self.owner_prefix}*"))

    def ack(self, owner: str, ids: Iterable[str] | None = None) -> int:
        mine = {_text(i) for i in self.client.zrange(self.owner_prefix + owner, 0, -1)}
        chosen = [i for i in (mine if ids is None else ids) if i in mine]
        return int(self.client.hdel(self.undelivered, *chosen)) if chosen else 0

    def undelivered_digests(self) -> set[str]:
        return {_text(d) for d in self.client.hvals(self.undelivered)}


def zset_page(client: redis.Redis, key: str, limit: int, after: Cursor | None = None, newer: bool = False) -> list[str]:
    """Up to ``limit`` members of sorted set ``key``, highest score first (ties: the higher
    member first, Redis's reverse order), past ``after`` (score, member): lower than it, or
    with ``newer`` just higher. One script call: the cursor's rank (O(log n)) and the range
    from it, read together, so a member added meanwhile is neither skipped nor repeated."""
    limit = max(int(limit), 0)
    if not limit:
        return []
    args = [limit, int(newer)] + ([] if after is None else [int(after[0]), str(after[1])])
    return [_text(m) for m in client.register_script(_ZSET_PAGE)(keys=[key], args=args)]


# KEYS[1] a sorted set; ARGV: how many, newer (1) or older (0), then the cursor's score and member
# (none: from the top). A cursor whose member is gone is placed by its score (its ties skipped).
_ZSET_PAGE = """
local n, newer = tonumber(ARGV[1]), ARGV[2] == '1'
if #ARGV < 4 then return redis.call('ZREVRANGE', KEYS[1], 0, n - 1) end
local r = redis.call('ZREVRANK', KEYS[1], ARGV[4])
if r and tonumber(redis.call('ZSCORE', KEYS[1], ARGV[4])) == tonumber(ARGV[3]) then
  if not newer then return redis.call('ZREVRANGE', KEYS[1], r + 1, r + n) end
  if r == 0 then return {} end
  return redis.call('ZREVRANGE', KEYS[1], math.max(0, r - n), r - 1)
end
if not newer then return redis.call('ZREVRANGEBYSCORE', KEYS[1], '(' .. ARGV[3], '-inf', 'LIMIT', 0, n) end
local up = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[3], '+inf', 'LIMIT', 0, n)
local out = {}
for i = #up, 1, -1 do out[#out + 1] = up[i] end
return out
"""


# KEYS: ACI hash, undelivered hash, then each ACI's owner's sorted set. ARGV: per ACI, its
# id, XML, update time and digest. Returns how many were new (a repeated id is left as it was).
# Every key's type is checked before the first write: a script that failed half-way would
# keep what it wrote, and a page's ACIs are stored all or none.
_ADD_ACI = """
for i = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= (i <= 2 and 'hash' or 'zset') then
    return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. t .. ': no ACI of this page stored')
  end
end
local added = 0
for i = 3, #KEYS do
  local n = (i - 3) * 4
  if redis.call('HSETNX', KEYS[1], ARGV[n + 1], ARGV[n + 2]) == 1 then
    redis.call('ZADD', KEYS[i], ARGV[n + 3], ARGV[n + 1])
    redis.call('HSET', KEYS[2], ARGV[n + 1], ARGV[n + 4])
    added = added + 1
  end
end
return added
"""


class RedisResultsStore(ResultsStore):
    """The results table in Redis: ``P results:doc`` (hash URL -> seq; the last seq given
    is ``P results:docseq``), ``P results:rule:<name>`` (hash URL -> JSON ``{"seq",
    "results", "updated"}``), ``P results:rules`` (set of rule names)."""

    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.docs = f"{key_prefix}results:doc"
        self.counter = f"{key_prefix}results:docseq"
        self.rule_prefix = f"{key_prefix}results:rule:"
        self.names = f"{key_prefix}results:rules"
        self._seq = client.register_script(_ASSIGN_SEQ)

    def seq(self, url: str) -> int:
        return int(self._seq(keys=[self.docs, self.counter], args=[url]))

    def put(self, rule: str, url: str, seq: int, results: list, at_ms: int) -> None:
        record = json.dumps({"seq": seq, "results": results, "updated": at_ms}, ensure_ascii=False)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.rule_prefix + rule, url, record)
        pipe.sadd(self.names, rule)
        pipe.execute()

    def get(self, rule: str, url: str) -> list | None:
        raw = self.client.hget(self.rule_prefix + rule, url)
        return json.loads(raw)["results"] if raw else None

    def rows(self, rule: str | None = None) -> Iterator[tuple[str, str, int, list]]:
        for name in [rule] if rule is not None else self.rules():
            stored = self.client.hgetall(self.rule_prefix + name)
            records = [(_text(url), json.loads(raw)) for url, raw in stored.items()]
            for url, record in sorted(records, key=lambda r: r[1]["seq"]):
                yield name, url, record["seq"], record["results"]

    def rules(self) -> list[str]:
        return sorted(_text(r) for r in self.client.smembers(self.names))


# KEYS: URL -> seq hash, counter. ARGV: URL. The URL's seq, assigned on first use.
_ASSIGN_SEQ = """
local seq = redis.call('HGET', KEYS[1], ARGV[1])
if seq then return tonumber(seq) end
seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], seq)
return seq
"""
