"""The state-store interfaces hold the same contract in SQLite and in a real Redis."""

from __future__ import annotations

import zlib

import pytest
import redis
from conftest import redis_space
from scrapy.settings import Settings

from webrace.backends import RedisUnavailable, connect, open_metainfo_store
from webrace.backends.base import Version
from webrace.backends.redis import RedisMetaInfoStore, safe_url
from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.records.metainfo import MetaInfo
from webrace.store.objects import digest_of


@pytest.fixture(params=["sqlite", "redis"])
def metainfo_store(request, tmp_path):
    if request.param == "sqlite":
        store = SqliteMetaInfoStore(tmp_path / "cache.sqlite")
    else:
        store = RedisMetaInfoStore(*redis_space(request))
    yield store
    store.close()


def meta(url: str, digest: str | None = None, n: int | None = None) -> MetaInfo:
    return MetaInfo(url, 200, 1000, "HTTP/1.1 200 OK", ("http://a.test/x",), "127.0.0.1", 10,
                    "Fri, 26 Jan 2001 21:46:08 GMT", '"e"', digest, n)


def test_put_and_get_round_trip_the_record(metainfo_store):
    assert metainfo_store.get("http://a.test/") is None
    record = meta("http://a.test/", "a" * 64, 1)
    metainfo_store.put(record, Version("http://a.test/", 1, "a" * 64, 1000, 10, 200))
    assert metainfo_store.get("http://a.test/") == record
    assert metainfo_store.versions("http://a.test/") == [Version("http://a.test/", 1, "a" * 64, 1000, 10, 200)]
    assert metainfo_store.urls() == ["http://a.test/"]


def test_prune_keeps_the_newest_and_protected_versions(metainfo_store):
    url = "http://a.test/"
    for n in range(1, 6):
        metainfo_store.put(meta(url, f"{n}" * 64, n), Version(url, n, f"{n}" * 64, n, 10, 200))
    dropped = metainfo_store.prune(keep=2, protected={"2" * 64})
    assert sorted(v.number for v in dropped) == [1, 3]
    assert [v.number for v in metainfo_store.versions(url)] == [2, 4, 5]
    assert metainfo_store.referenced_digests() == {"2" * 64, "4" * 64, "5" * 64}


def test_redis_url_switches_the_metainfo_store_to_redis(redis_url, redis_prefix, tmp_path):
    settings = Settings({"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
                         "WEBRACE_DATA_DIR": str(tmp_path)})
    store = open_metainfo_store(settings)
    assert isinstance(store, RedisMetaInfoStore)
    store.put(meta("http://a.test/"))
    keys = sorted(redis.Redis.from_url(redis_url).keys(f"{redis_prefix}*"))
    assert keys == [f"{redis_prefix}objects:id".encode(), f"{redis_prefix}url:http://a.test/".encode()]
    assert not (tmp_path / "cache.sqlite").exists()
    assert store.get("http://a.test/") == meta("http://a.test/")  # header and links from the object store


def test_without_redis_url_the_metainfo_store_is_embedded(tmp_path):
    store = open_metainfo_store(Settings({"WEBRACE_DATA_DIR": str(tmp_path)}))
    assert isinstance(store, SqliteMetaInfoStore)
    store.close()


def test_unreachable_redis_is_one_clear_error_naming_the_url_without_its_password():
    settings = Settings({"REDIS_URL": "redis://alice:s3cret@127.0.0.1:1/0",
                         "REDIS_PARAMS": {"socket_connect_timeout": 2, "socket_timeout": 2}})
    with pytest.raises(RedisUnavailable) as info:
        connect(settings)
    message = str(info.value)
    assert "redis://alice:***@127.0.0.1:1/0" in message and "s3cret" not in message


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://:pw@h:1/2", "redis://:***@h:1/2"),
    ("rediss://u:pw@h:1", "rediss://u:***@h:1"),
])
def test_safe_url_hides_passwords(url, shown):
    assert safe_url(url) == shown


@pytest.fixture(params=["sqlite", "redis", "redis-bodies"])
def object_cache(request, tmp_path):
    from webrace.backends.redis import RedisObjectStore
    from webrace.store.cache import ObjectCache
    from webrace.store.objects import ObjectStore

    if request.param == "sqlite":
        cache = ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), ObjectStore(tmp_path / "objects"))
    elif request.param == "redis":  # the distributed default: meta-info in Redis, bodies in a shared directory
        client, prefix = redis_space(request)
        objects = ObjectStore(tmp_path / "objects")
        cache = ObjectCache(RedisMetaInfoStore(client, prefix, objects), objects)
    else:
        client, prefix = redis_space(request)
        cache = ObjectCache(RedisMetaInfoStore(client, prefix), RedisObjectStore(client, prefix))
    yield cache
    cache.close()


def gone_after_drop(cache, digest):
    """Embedded, a body nobody points to is deleted at once; distributed, another worker may be
    about to point a new version at it, so it stays until gc finds it unreferenced."""
    if isinstance(cache.index, SqliteMetaInfoStore):
        return not cache.objects.exists(digest)
    present = cache.objects.exists(digest)
    cache.gc(keep=3)
    return present and not cache.objects.exists(digest)


def fetch(cache, url, body, at):
    return cache.record_fetch(url, 200, body, fetched=at, header="HTTP/1.1 200 OK", links=[], etag='"e"')


def test_dropping_an_irrelevant_body_keeps_the_metainfo_and_a_shared_object(object_cache):
    kept = fetch(object_cache, "http://a.test/", b"same body", 1)  # relevant to someone: kept
    other = fetch(object_cache, "http://b.test/", b"same body", 2)
    assert object_cache.drop(other.meta)
    meta = object_cache.lookup("http://b.test/")
    assert meta.dropped and meta.digest == other.meta.digest and meta.etag == '"e"' and meta.version == 1
    assert object_cache.versions("http://b.test/") == []
    assert object_cache.check(meta) is None  # a dropped body is not "missing": re-crawl stays conditional
    assert object_cache.objects.exists(kept.meta.digest)  # a.test's version still points to it
    alone = fetch(object_cache, "http://c.test/", b"nobody cares", 3)
    assert object_cache.drop(alone.meta)
    assert gone_after_drop(object_cache, alone.meta.digest)
    assert object_cache.objects.exists(kept.meta.digest)


def test_an_unchanged_dropped_body_is_not_stored_again_and_a_new_one_gets_the_next_number(object_cache):
    first = fetch(object_cache, "http://a.test/", b"v1", 1)
    object_cache.drop(first.meta)
    again = fetch(object_cache, "http://a.test/", b"v1", 2)
    assert again.unchanged and not again.new_version and again.meta.dropped
    assert gone_after_drop(object_cache, first.meta.digest)
    second = fetch(object_cache, "http://a.test/", b"v2", 3)
    assert second.new_version and second.version == 2 and not second.meta.dropped
    assert [v.number for v in object_cache.versions("http://a.test/")] == [2]


def test_drop_does_nothing_when_a_newer_fetch_replaced_the_record(object_cache):
    first = fetch(object_cache, "http://a.test/", b"v1", 1)
    fetch(object_cache, "http://a.test/", b"v2", 2)
    assert not object_cache.drop(first.meta)
    assert [v.number for v in object_cache.versions("http://a.test/")] == [1, 2]
    assert object_cache.objects.exists(first.meta.digest)


FEED = (b'<?xml version="1.0"?>\n<rss version="2.0"><channel><title>News</title>'
        + b"".join(b'<item id="%d"><title>Story %d</title><link>http://example.org/%d</link></item>' % (n, n, n)
                   for n in range(40)) + b"</channel></rss>")


def test_xml_versions_are_stored_xpack_encoded_and_queried_without_unpacking(object_cache):
    from webrace.store.objects import ObjectCorrupt
    from webrace.xpack import canonical

    object_cache.objects.xpack = True
    header = "HTTP/1.1 200 OK\nContent-Type: application/rss+xml; charset=utf-8"
    done = object_cache.record_fetch("http://a.test/feed", 200, FEED, fetched=1, header=header, links=[])
    assert done.meta.digest == digest_of(FEED)  # the digest of the fetched bytes: re-crawls compare exactly
    again = object_cache.record_fetch("http://a.test/feed", 200, FEED, fetched=2, header=header, links=[])
    assert again.unchanged and not again.new_version
    stored = object_cache.objects._load(done.meta.digest)
    assert stored.startswith(b"XPK2") and len(stored) < len(zlib.compress(FEED, 6))
    assert canonical(object_cache.get("http://a.test/feed")[1]) == canonical(FEED)
    version, doc = object_cache.packed("http://a.test/feed")
    assert version.number == 1 and len(doc.query("//item")) == 40
    assert [v for _, v in doc.query("//item[@id='7']/title/text()")] == ["Story 7"]
    assert doc.query("/rss/@version") == [("attribute", "2.0")]
    assert object_cache.check(done.meta) is None
    damaged = bytearray(stored)
    damaged[-3] ^= 0xFF
    object_cache.objects._write(done.meta.digest, bytes(damaged), replace=True)
    assert object_cache.check(done.meta) == "corrupt"
    with pytest.raises(ObjectCorrupt):
        object_cache.get("http://a.test/feed")


def test_html_and_malformed_xml_stay_byte_for_byte_with_the_xpack_codec(object_cache):
    object_cache.objects.xpack = True
    page = b"<html><body><script src='x.js'></script><p>same bytes</p></body></html>"
    broken = b'<?xml version="1.0"?><feed><entry>unclosed</feed>'
    html = object_cache.record_fetch("http://a.test/", 200, page, fetched=1, links=[],
                                     header="HTTP/1.1 200 OK\nContent-Type: text/html")
    xml = object_cache.record_fetch("http://a.test/f", 200, broken, fetched=1, links=[],
                                    header="HTTP/1.1 200 OK\nContent-Type: text/xml")
    for meta, body in ((html.meta, page), (xml.meta, broken)):
        assert not object_cache.objects._load(meta.digest).startswith(b"XPK2")
        assert object_cache.get(meta.url)[1] == body
        assert object_cache.packed(meta.url)[1] is None


def test_get_many_answers_as_get_does_for_each_url(metainfo_store):
    metainfo_store.put(meta("http://a.test/1", "a" * 64, 1), Version("http://a.test/1", 1, "a" * 64, 1000, 10, 200))
    metainfo_store.put(meta("http://a.test/3", "b" * 64, 1))
    urls = ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert metainfo_store.get_many(urls) == [metainfo_store.get(url) for url in urls]
    assert metainfo_store.get_many(urls)[1] is None


def test_an_update_after_another_writer_changed_the_record_keeps_both_changes(redis_url, redis_prefix):
    # one store read the record (and would compare-and-set against it), another worker's store
    # adds a version meanwhile: the first one's version comes after it, none is lost
    url = "http://a.test/"
    first, second = (RedisMetaInfoStore(redis.Redis.from_url(redis_url), redis_prefix) for _ in range(2))
    first.put(meta(url, "a" * 64, 1), Version(url, 1, "a" * 64, 1, 10, 200))
    assert first.get(url).version == 1
    second.put(meta(url, "b" * 64, 2), Version(url, 2, "b" * 64, 2, 10, 200))
    first.put(meta(url, "c" * 64, 3), Version(url, 3, "c" * 64, 3, 10, 200))
    assert [v.number for v in second.versions(url)] == [1, 2, 3]
    assert second.get(url).digest == "c" * 64
    # a record deleted meanwhile (a flushed Redis) is written again, not lost
    redis.Redis.from_url(redis_url).delete(f"{redis_prefix}url:{url}")
    first.put(meta(url, "d" * 64, 4), Version(url, 4, "d" * 64, 4, 10, 200))
    assert [v.number for v in second.versions(url)] == [4]


def test_the_urds_that_wanted_a_page_and_when_a_round_confirmed_it_round_trip(metainfo_store):
    from dataclasses import replace

    url = "http://a.test/"
    record = replace(meta(url, "a" * 64, 1), checked=1_700_000_000_000, wanted=("0123456789ab", "ba9876543210"))
    metainfo_store.put(record)
    assert metainfo_store.get(url) == record
    assert record.wanting(["ba9876543210", "ffffffffffff"]) == ("0123456789ab", "ba9876543210", "ffffffffffff")


def test_confirm_replaces_the_record_and_keeps_the_revisit(metainfo_store):
    from dataclasses import replace

    from webrace.records.metainfo import Revisit

    url = "http://a.test/"
    metainfo_store.put(meta(url, "a" * 64, 1), Version(url, 1, "a" * 64, 1000, 10, 200))
    confirmed = replace(meta(url, "a" * 64, 1), checked=5000, wanted=("0123456789ab",))
    metainfo_store.confirm(confirmed, Revisit(url, 5000, 1, "a" * 64), keep=3)
    assert metainfo_store.get(url) == confirmed
    assert [(r.fetched, r.number) for r in metainfo_store.revisits(url)] == [(5000, 1)]


def test_want_adds_reach_keys_and_keeps_what_another_writer_changed(metainfo_store):
    from dataclasses import replace

    url = "http://a.test/"
    assert metainfo_store.want(url, ["0123456789ab"]) is None  # no record: nothing to add to
    metainfo_store.put(replace(meta(url, "a" * 64, 1), wanted=("0123456789ab",)))
    metainfo_store.put(replace(meta(url, "a" * 64, 1), wanted=("0123456789ab",), dropped=True))  # a drop meanwhile
    assert metainfo_store.want(url, ["ba9876543210", "0123456789ab"]).wanted == ("0123456789ab", "ba9876543210")
    after = metainfo_store.get(url)
    assert after.dropped and after.wanted == ("0123456789ab", "ba9876543210")
