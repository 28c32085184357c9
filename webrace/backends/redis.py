"""Distributed state stores: Redis, every key under ``WEBRACE_REDIS_PREFIX``.

The client is scrapy-redis's (built from the settings, ``REDIS_PARAMS`` included); the mode
and the URL are the factory's (``webrace.backends``). A password in the URL never reaches a
log or a message.

Keys (``P`` is the prefix, default ``webrace:``):

- ``P meta``              hash: URL -> meta-info XML (the seed's record, as in SQLite)
- ``P versions:<URL>``    list: the URL's versions, oldest first, one JSON object each
- ``P object:<sha256>``   string: a stored body, zlib-compressed
- ``P refs``              hash: digest -> number of versions pointing to it (drops, prune)
- ``P aci`` / ``P aci:owner:<owner>`` / ``P aci:undelivered``  the ACI store (``RedisAciStore``)
- ``P results:doc`` / ``P results:rule:<name>`` / ``P results:rules``  Scout's results table
- ``P round:<id>:...``    a round's URDs and shared frontier (``webrace.distributed``)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import redis
from scrapy_redis.connection import get_redis_from_settings

from webrace.backends.base import AciStore, MetaInfoStore, ResultsStore, Version
from webrace.records.aci import Aci
from webrace.records.metainfo import MetaInfo
from webrace.store.objects import CompressedObjects, ObjectMissing

DEFAULT_PREFIX = "webrace:"


class RedisUnavailable(RuntimeError):
    """Redis cannot be reached, or the configured URL is not a Redis URL: one line naming the
    URL (without its password) and what to do."""


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
        raise RedisUnavailable(
            f"Cannot reach Redis at {shown}: {_one_line(exc, url)}. "
            "Start it, fix REDIS_URL, or unset REDIS_URL to run embedded."
        ) from None
    return client


def prefix(settings: Any) -> str:
    return settings.get("WEBRACE_REDIS_PREFIX") or DEFAULT_PREFIX


class RedisMetaInfoStore(MetaInfoStore):
    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.prefix = key_prefix
        self.meta_key = f"{key_prefix}meta"
        self.refs_key = f"{key_prefix}refs"
        self._drop = client.register_script(_DROP_VERSION)

    def _versions_key(self, url: str) -> str:
        return f"{self.prefix}versions:{url}"

    def get(self, url: str) -> MetaInfo | None:
        xml = self.client.hget(self.meta_key, url)
        return MetaInfo.from_xml(_text(xml)) if xml else None

    def put(self, meta: MetaInfo, new_version: Version | None = None) -> None:
        pipe = self.client.pipeline(transaction=True)  # MULTI/EXEC: both or neither
        pipe.hset(self.meta_key, meta.url, meta.to_xml())
        if new_version is not None:
            pipe.rpush(self._versions_key(meta.url), json.dumps(_as_record(new_version)))
            pipe.hincrby(self.refs_key, new_version.digest, 1)
        pipe.execute()

    def versions(self, url: str) -> list[Version]:
        return [_version(url, raw) for raw in self.client.lrange(self._versions_key(url), 0, -1)]

    def urls(self) -> list[str]:
        return sorted(_text(url) for url in self.client.hkeys(self.meta_key))

    def prune(self, keep: int, protected: set[str] = frozenset()) -> list[Version]:
        dropped = []
        for url in self.urls():
            versions = self.versions(url)
            old = [v for v in versions[: max(len(versions) - max(keep, 1), 0)] if v.digest not in protected]
            if not old:
                continue
            pipe = self.client.pipeline(transaction=True)
            for v in old:
                pipe.lrem(self._versions_key(url), 1, json.dumps(_as_record(v)))
                pipe.hincrby(self.refs_key, v.digest, -1)
            pipe.execute()
            dropped.extend(old)
        return dropped

    def referenced_digests(self) -> set[str]:
        return {v.digest for url in self.urls() for v in self.versions(url)}

    def drop_version(self, expected: MetaInfo, meta: MetaInfo, version: Version) -> bool | None:
        result = self._drop(keys=[self.meta_key, self._versions_key(meta.url), self.refs_key],
                            args=[meta.url, expected.to_xml(), meta.to_xml(), json.dumps(_as_record(version)),
                                  version.digest])
        return None if result is None or int(result) < 0 else int(result) > 0


# KEYS: meta hash, the URL's versions list, refs hash. ARGV: url, expected meta XML, new meta
# XML, the version's JSON record, its digest. Returns -1 when the record changed, else how
# many versions still point to the digest.
_DROP_VERSION = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if redis.call('LREM', KEYS[2], 1, ARGV[4]) > 0 then
  local left = redis.call('HINCRBY', KEYS[3], ARGV[5], -1)
  if left <= 0 then redis.call('HDEL', KEYS[3], ARGV[5]) end
  return math.max(left, 0)
end
return tonumber(redis.call('HGET', KEYS[3], ARGV[5]) or '0')
"""


def _as_record(v: Version) -> dict[str, Any]:
    return {"n": v.number, "digest": v.digest, "fetched": v.fetched, "size": v.size, "status": v.status}


def _version(url: str, raw: bytes | str) -> Version:
    r = json.loads(raw)
    return Version(url, r["n"], r["digest"], r["fetched"], r["size"], r["status"])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisObjectStore(CompressedObjects):
    """Objects in Redis, under ``<prefix>object:<sha256>``, so that every worker on every
    machine reads what any worker stored. A SET is atomic: no half-written object."""

    def __init__(self, client: redis.Redis, key_prefix: str = DEFAULT_PREFIX, level: int = 6) -> None:
        self.client = client
        self.prefix = f"{key_prefix}object:"
        self.level = level

    def _load(self, digest: str) -> bytes:
        data = self.client.get(self.prefix + digest)
        if data is None:
            raise ObjectMissing(digest)
        return data

    def _write(self, digest: str, data: bytes, replace: bool) -> bool:
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

    def sweep(self) -> int:
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
        added = 0
        for a in acis:
            added += int(self._add(keys=[self.key, self.owner_prefix + a.owner, self.undelivered],
                                   args=[a.id, a.to_xml(), a.updatetime, a.docbase]))
        return added

    def list(self, owner: str, since: int = 0, min_relevance: float = 0.0) -> list[Aci]:
        ids = self.client.zrangebyscore(self.owner_prefix + owner, since, "+inf")
        if not ids:
            return []
        acis = [Aci.from_xml(_text(x)) for x in self.client.hmget(self.key, ids) if x]
        return sorted((a for a in acis if a.relevance >= min_relevance), key=lambda a: (-a.updatetime, a.id))

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


# KEYS: ACI hash, the owner's sorted set, undelivered hash. ARGV: id, XML, update time, digest.
_ADD_ACI = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
return 1
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
