"""Nothing follows a symbolic link out of the object store (issue 42: `store gc` deleted
files outside the store through a link inside `objects/`): gc lists and skips links, reads
refuse them, writes never go through them, and what they point to is never touched."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from conftest import urd

from webrace.backends import open_object_cache
from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectCorrupt, ObjectStore, ObjectStoreUnwritable, digest_of

HEADER = "HTTP/1.1 200 OK\nContent-Type: text/html"
OUTSIDE = "ff" + "0" * 62  # a name gc would take for an object's


@pytest.fixture
def cache(tmp_path):
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), ObjectStore(tmp_path / "objects")) as c:
        yield c


@pytest.fixture
def victim(tmp_path):
    """A directory outside the store with files named as objects and temporary files are."""
    place = tmp_path / "victim"
    place.mkdir()
    for name in (f"{OUTSIDE}.z", "precious.z", "old.part"):
        (place / name).write_bytes(b"not the store's")
        os.utime(place / name, (time.time() - 86_400,) * 2)
    return place


def record(cache, url, body, at=1000):
    return cache.record_fetch(url, 200, body, fetched=at, header=HEADER, links=[])


def untouched(victim) -> bool:
    return sorted(p.name for p in victim.iterdir()) == sorted([f"{OUTSIDE}.z", "precious.z", "old.part"])


def test_gc_never_deletes_through_a_linked_shard_and_lists_the_link(cache, victim):
    record(cache, "http://a.test/", b"kept")
    orphan, _, _ = cache.objects.put(b"nobody points here")
    (cache.objects.root / "ff").symlink_to(victim, target_is_directory=True)
    report = cache.gc(keep=1)
    assert untouched(victim)
    assert report.links == ["ff"] and report.objects_deleted == 1 and not cache.objects.exists(orphan)
    assert cache.get("http://a.test/")[1] == b"kept"


def test_gc_leaves_a_linked_object_and_what_it_points_to(cache, victim):
    record(cache, "http://a.test/", b"kept")
    link = cache.objects.root / "ff" / f"{OUTSIDE}.z"
    link.parent.mkdir()
    link.symlink_to(victim / f"{OUTSIDE}.z")
    report = cache.gc(keep=1)
    assert report.links == [f"ff/{OUTSIDE}.z"] and report.objects_deleted == 0
    assert link.is_symlink() and untouched(victim)


def test_gc_never_sweeps_through_a_linked_temporary_directory(cache, victim):
    shutil.rmtree(cache.objects.tmp)
    cache.objects.tmp.symlink_to(victim, target_is_directory=True)
    report = cache.gc(keep=1, force=True)
    assert report.temporary_files == 0 and report.links == ["tmp"] and untouched(victim)


def test_a_body_that_is_a_link_is_refused_not_read_even_to_a_good_copy(cache, tmp_path):
    rec = record(cache, "http://a.test/", b"body")
    path = cache.objects.path(rec.meta.digest)
    copy = tmp_path / "copy.z"
    shutil.copy(path, copy)  # outside the store, the right bytes
    path.unlink()
    path.symlink_to(copy)
    with pytest.raises(ObjectCorrupt, match="symbolic link"):
        cache.get("http://a.test/")
    assert cache.check(rec.meta) == "corrupt"  # the crawl fetches the page again
    assert not cache.objects.exists(rec.meta.digest)


def test_fetching_the_page_again_replaces_the_link_itself(cache, tmp_path):
    rec = record(cache, "http://a.test/", b"body")
    path = cache.objects.path(rec.meta.digest)
    elsewhere = tmp_path / "elsewhere.z"
    elsewhere.write_bytes(b"someone else's file")
    path.unlink()
    path.symlink_to(elsewhere)
    again = record(cache, "http://a.test/", b"body", at=2000)
    assert again.unchanged and not path.is_symlink() and cache.get("http://a.test/")[1] == b"body"
    assert elsewhere.read_bytes() == b"someone else's file"


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "side object"])
def test_a_write_into_a_linked_shard_stops_and_writes_nothing_outside(tmp_path, victim, durable):
    store = ObjectStore(tmp_path / "objects")
    body = b"a body whose digest starts the shard we link"
    (store.root / digest_of(body)[:2]).symlink_to(victim, target_is_directory=True)
    with pytest.raises(ObjectStoreUnwritable, match="symbolic link"):
        store.put(body, durable=durable)
    assert untouched(victim) and not list(store.tmp.iterdir())


def test_a_file_that_is_no_regular_file_is_not_read(cache):
    rec = record(cache, "http://a.test/", b"body")
    path = cache.objects.path(rec.meta.digest)
    path.unlink()
    os.mkfifo(path)  # opening a FIFO to read would wait for a writer forever
    with pytest.raises(ObjectCorrupt, match="not a regular file"):
        cache.get("http://a.test/")


def test_store_gc_command_warns_of_the_links_it_skipped(project, victim):
    project.add_urds(urd("u1", "alice", "http://a.test/"))
    with open_object_cache(project.settings()) as cache:
        record(cache, "http://a.test/", b"kept")
        root = cache.objects.root
    (root / "ff").symlink_to(victim, target_is_directory=True)
    done = project.scrapy("store", "gc", "--keep", "1")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (f"warning: skipped 1 symbolic link(s) in the object store {root}, not followed: ff")
    assert untouched(victim)
