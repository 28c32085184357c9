"""The object cache as a library: content addressing, versions, atomic writes, crashes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.records.metainfo import MetaInfo
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectCorrupt, ObjectMissing, ObjectStore, ObjectStoreUnwritable, digest_of
from webrace.xmlutil import schema


@pytest.fixture
def cache(tmp_path):
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), ObjectStore(tmp_path / "objects")) as c:
        yield c


def record(cache, url, body, at=1000, **kw):
    return cache.record_fetch(url, 200, body, fetched=at, header="HTTP/1.1 200 OK\nContent-Type: text/html",
                              links=kw.pop("links", []), **kw)


def test_identical_bodies_are_stored_once_across_urls(cache):
    a = record(cache, "http://a.test/", b"same body")
    b = record(cache, "http://b.test/", b"same body")
    assert a.meta.digest == b.meta.digest == digest_of(b"same body")
    assert len(list(cache.objects.digests())) == 1


def test_versions_are_numbered_and_read_back(cache):
    record(cache, "http://a.test/", b"v1", at=1)
    again = record(cache, "http://a.test/", b"v1", at=2)
    second = record(cache, "http://a.test/", b"v2", at=3)
    assert (again.new_version, again.unchanged) == (False, True)
    assert (second.new_version, second.version) == (True, 2)
    assert [(v.number, v.fetched) for v in cache.versions("http://a.test/")] == [(1, 1), (2, 3)]
    assert cache.get("http://a.test/")[1] == b"v2"
    assert cache.get("http://a.test/", 1)[1] == b"v1"


def test_error_status_keeps_versions_and_drops_validators(cache):
    record(cache, "http://a.test/", b"v1", etag='"x"')
    gone = cache.record_fetch("http://a.test/", 404, b"nope", fetched=5, header="HTTP/1.1 404", links=[])
    assert gone.meta.status == 404 and gone.meta.etag is None and gone.version == 1
    assert cache.get("http://a.test/")[1] == b"v1"


def test_metainfo_records_validate_against_the_schema(cache):
    rec = record(cache, "http://a.test/p?q=1", b"x" * 3000, ip="127.0.0.1", etag='"e"',
                 lastmodified="Fri, 26 Jan 2001 21:46:08 GMT", links=["http://a.test/", "http://a.test/b"])
    xml = rec.meta.to_xml()
    schema("metainfo").validate(xml)
    meta = MetaInfo.from_xml(xml)
    assert meta == rec.meta and meta.kbytes == 3 and meta.ifmodifiedsince == 980545568000


def test_corrupt_and_missing_objects_are_reported_not_returned(cache):
    rec = record(cache, "http://a.test/", b"body")
    path = cache.objects.path(rec.meta.digest)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ObjectCorrupt):
        cache.get("http://a.test/")
    assert cache.check(rec.meta) == "corrupt"
    path.unlink()
    with pytest.raises(ObjectMissing):
        cache.get("http://a.test/")
    assert cache.check(rec.meta) == "missing"


def test_a_failed_write_leaves_the_store_as_it_was(cache, monkeypatch):
    record(cache, "http://a.test/", b"v1")

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "link", disk_full)
    with pytest.raises(ObjectStoreUnwritable, match="object store .*: the disk is full"):
        record(cache, "http://a.test/", b"v2")
    monkeypatch.undo()
    assert [v.number for v in cache.versions("http://a.test/")] == [1]
    assert cache.get("http://a.test/")[1] == b"v1"
    assert not list(cache.objects.tmp.iterdir())  # the partial file was removed


def test_a_failed_index_commit_leaves_only_an_orphan_object_for_gc(cache, monkeypatch):
    record(cache, "http://a.test/", b"v1")
    monkeypatch.setattr(cache.index, "put", lambda *a, **k: (_ for _ in ()).throw(OSError("database is locked")))
    with pytest.raises(OSError):
        record(cache, "http://a.test/", b"v2")
    monkeypatch.undo()
    assert [v.number for v in cache.versions("http://a.test/")] == [1]
    report = cache.gc(keep=3)
    assert report.objects_deleted == 1 and report.versions_dropped == 0
    assert cache.get("http://a.test/")[1] == b"v1"


WRITER = textwrap.dedent("""
    import sys
    from webrace.backends.sqlite import SqliteMetaInfoStore
    from webrace.store.cache import ObjectCache
    from webrace.store.objects import ObjectStore
    root = sys.argv[1]
    cache = ObjectCache(SqliteMetaInfoStore(root + "/cache.sqlite"), ObjectStore(root + "/objects"))
    n = 0
    while True:
        n += 1
        body = (f"version {n} " * 20000).encode()
        cache.record_fetch(f"http://a.test/{n % 7}", 200, body, fetched=n, header="HTTP/1.1 200 OK", links=[])
        print(n, flush=True)
""")


def test_killing_the_writer_mid_stream_leaves_a_readable_store(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if int(line) >= 40:
                break
        proc.send_signal(signal.SIGKILL)  # wherever it is: between two writes or inside one
    finally:
        proc.wait(timeout=30)
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), ObjectStore(tmp_path / "objects")) as cache:
        urls = cache.index.urls()
        assert len(urls) == 7
        for url in urls:
            for version in cache.versions(url):
                assert cache.get(url, version.number)[1].startswith(b"version ")
        report = cache.gc(keep=100)
        assert report.versions_dropped == 0
        referenced = cache.index.referenced_digests()
        assert set(cache.objects.digests()) == referenced


def test_the_object_stores_xpack_magic_is_xpacks_own() -> None:
    """The object store writes XPack's magic out (reading a body must not import numpy)."""
    from webrace.store.objects import XPACK_MAGIC
    from webrace.xpack.format import MAGIC

    assert XPACK_MAGIC == MAGIC
