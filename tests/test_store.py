"""The object cache as a library: content addressing, versions, atomic writes, crashes; and the
contract every body store keeps (the directory store and the S3 store, on a real S3 API server)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.records.metainfo import MetaInfo
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectCorrupt, ObjectMissing, ObjectStore, ObjectStoreUnwritable, digest_of
from webrace.xmlutil import schema

STORES = ["directory", "s3"]


class Kind:
    """A body store of one kind, and what a test does to it from outside: the bytes stored
    under a digest replaced (a damaged copy) or removed, its time set back."""

    def __init__(self, request: pytest.FixtureRequest, name: str, tmp_path) -> None:
        self.name, self.tmp_path = name, tmp_path
        if name == "s3":
            self.server, self.bucket = request.getfixturevalue("s3_server"), request.getfixturevalue("s3_bucket")

    def store(self):
        """A store on the same place (two calls: two writers sharing it, as two workers do)."""
        if self.name == "directory":
            return ObjectStore(self.tmp_path / "objects")
        from webrace.store.s3 import S3ObjectStore

        return S3ObjectStore(self.server.client(), self.bucket, "objects/", endpoint=self.server.url)

    def overwrite(self, objects, digest: str, data: bytes) -> None:
        if self.name == "directory":
            objects.path(digest).write_bytes(data)
        else:
            self.server.client().put_object(Bucket=self.bucket, Key=objects.key(digest), Body=data)

    def stored(self, objects, digest: str) -> bytes:
        if self.name == "directory":
            return objects.path(digest).read_bytes()
        return self.server.client().get_object(Bucket=self.bucket, Key=objects.key(digest))["Body"].read()

    def remove(self, objects, digest: str) -> None:
        if self.name == "directory":
            objects.path(digest).unlink()
        else:
            self.server.client().delete_object(Bucket=self.bucket, Key=objects.key(digest))

    def date_back(self, objects, digest: str, seconds: float) -> None:
        if self.name == "directory":
            import time

            past = time.time() - seconds
            os.utime(objects.path(digest), (past, past))
        else:
            self.server.date_back(self.bucket, objects.key(digest), seconds)

    @contextlib.contextmanager
    def unwritable(self, monkeypatch):
        """Writes fail as the place fails: a full disk; a server refusing this client."""
        if self.name == "directory":
            def disk_full(*args, **kwargs):
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(os, "link", disk_full)
            try:
                yield "the disk is full"
            finally:
                monkeypatch.undo()
        else:
            self.server.require_credentials(True)
            try:
                yield "access denied"
            finally:
                self.server.require_credentials(False)


@pytest.fixture(params=STORES)
def kind(request, tmp_path) -> Kind:
    return Kind(request, request.param, tmp_path)


@pytest.fixture
def cache(kind, tmp_path):
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), kind.store()) as c:
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


def test_corrupt_and_missing_objects_are_reported_not_returned(cache, kind):
    rec = record(cache, "http://a.test/", b"body")
    digest = rec.meta.digest
    kind.overwrite(cache.objects, digest, kind.stored(cache.objects, digest)[:-3])
    with pytest.raises(ObjectCorrupt):
        cache.get("http://a.test/")
    assert cache.check(rec.meta) == "corrupt"
    kind.remove(cache.objects, digest)
    with pytest.raises(ObjectMissing):
        cache.get("http://a.test/")
    assert cache.check(rec.meta) == "missing"


def test_a_failed_write_is_one_line_and_leaves_the_store_as_it_was(cache, kind, monkeypatch):
    record(cache, "http://a.test/", b"v1")
    with kind.unwritable(monkeypatch) as reason, pytest.raises(ObjectStoreUnwritable) as info:
        record(cache, "http://a.test/", b"v2")
    assert f"object store {cache.objects.where}" in str(info.value) and reason in str(info.value)
    assert "\n" not in str(info.value) and "secret" not in str(info.value)
    assert [v.number for v in cache.versions("http://a.test/")] == [1]
    assert cache.get("http://a.test/")[1] == b"v1"
    assert list(cache.objects.digests()) == [digest_of(b"v1")]
    if kind.name == "directory":
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


def test_two_writers_storing_the_same_body_at_once_store_it_once_and_see_no_partial_object(kind):
    a, b = kind.store(), kind.store()
    for round_ in range(30 if kind.name == "directory" else 10):
        body = os.urandom(200_000) + str(round_).encode()
        barrier, written = threading.Barrier(2), []

        def put(store, body=body, barrier=barrier, written=written):
            barrier.wait()
            written.append(store.put(body)[1])

        threads = [threading.Thread(target=put, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(written) == [False, True]  # stored once
        assert a.get(digest_of(body)) == body == b.get(digest_of(body))
    if kind.name == "directory":
        assert not list(a.tmp.glob("*.part"))


def test_an_object_that_may_be_lost_is_stored_once_and_a_torn_one_is_repaired(kind, monkeypatch):
    from webrace.store import objects

    a, b = kind.store(), kind.store()

    def no_temporary_file(*args, **kwargs):
        raise AssertionError("a temporary file was made for an object that need not survive a crash")

    monkeypatch.setattr(objects, "_temporary", no_temporary_file)  # (the directory store: straight to its name)
    side = b'{"header":"HTTP/1.1 200 OK","links":[]}' * 50
    assert a.put(side, repair=True, durable=False)[1] is True
    assert b.put(side, repair=True, durable=False)[1] is False  # stored once, the first copy kept
    assert a.get(digest_of(side)) == side
    monkeypatch.undo()
    digest = digest_of(side)
    kind.overwrite(a, digest, kind.stored(a, digest)[:20])  # torn by a crash mid-write
    assert b.put(side, repair=True, durable=False)[1] is True  # read back, found corrupt, replaced
    assert a.get(digest) == side


def test_gc_spares_unreferenced_bodies_younger_than_its_grace_period_and_a_write_re_dates_one(kind, tmp_path):
    objects = kind.store()
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), objects) as c:
        record(c, "http://a.test/", b"kept", at=1)
        orphan = objects.put(b"written by a worker that has not committed its version yet")[0]
        report = c.gc(keep=3, grace=3600)
        assert report.objects_young == 1 and report.objects_deleted == 0 and objects.exists(orphan)
        kind.date_back(objects, orphan, 7200)
        objects.put(b"written by a worker that has not committed its version yet")  # a writer re-dates it
        assert c.gc(keep=3, grace=3600).objects_deleted == 0
        kind.date_back(objects, orphan, 7200)
        report = c.gc(keep=3, grace=3600)
        assert report.objects_deleted == 1 and not objects.exists(orphan)
        assert c.get("http://a.test/")[1] == b"kept"
        kind.date_back(objects, digest_of(b"kept"), 7200)
        assert c.gc(keep=3, grace=3600).objects_deleted == 0  # an old body a version points to stays


def test_two_stores_on_one_place_have_one_identity(kind):
    assert kind.store().identity() == kind.store().identity()


WRITER = textwrap.dedent("""
    import sys
    from webrace.backends.sqlite import SqliteMetaInfoStore
    from webrace.store.cache import ObjectCache
    from webrace.store.objects import ObjectStore
    from webrace.store.s3 import S3ObjectStore, make_client
    root, kind = sys.argv[1:3]
    if kind == "directory":
        objects = ObjectStore(root + "/objects")
    else:
        endpoint, bucket = sys.argv[3:]
        objects = S3ObjectStore(make_client(endpoint, "us-east-1"), bucket, "objects/", endpoint=endpoint)
    cache = ObjectCache(SqliteMetaInfoStore(root + "/cache.sqlite"), objects)
    n = 0
    while True:
        n += 1
        body = (f"version {n} " * 20000).encode()
        cache.record_fetch(f"http://a.test/{n % 7}", 200, body, fetched=n, header="HTTP/1.1 200 OK", links=[])
        print(n, flush=True)
""")


def test_killing_the_writer_mid_stream_leaves_a_readable_store(kind, tmp_path):
    where = [kind.server.url, kind.bucket] if kind.name == "s3" else []
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), kind.name, *where],
                            stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if int(line) >= 40:
                break
        proc.send_signal(signal.SIGKILL)  # wherever it is: between two writes or inside one
    finally:
        proc.wait(timeout=30)
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), kind.store()) as cache:
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
