"""The ACI store, and `store gc` keeping what an undelivered ACI points to."""

from __future__ import annotations

import pytest
from conftest import redis_space

from webrace.backends import open_object_cache
from webrace.backends.redis import RedisAciStore
from webrace.backends.sqlite import SqliteAciStore
from webrace.records.aci import Aci


@pytest.fixture(params=["sqlite", "redis"])
def aci_store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteAciStore(tmp_path / "aci.sqlite")
    return RedisAciStore(*redis_space(request))


def aci(owner: str, at: int, relevance: float, docbase: str, uri: str = "http://a.test/") -> Aci:
    return Aci(owner=owner, uri=uri, relevance=relevance, updatetime=at, filesize=10, version=1,
               docbase=docbase, summary="s")


def test_acis_are_listed_newest_first_with_filters_and_kept_once(aci_store):
    with aci_store as store:
        assert store.add([aci("alice", 1, 5, "a" * 64), aci("alice", 3, 1, "b" * 64), aci("bob", 2, 9, "a" * 64)]) == 3
        assert store.add([aci("alice", 1, 5, "a" * 64)]) == 0  # the same owner, page and version
        assert [a.updatetime for a in store.list("alice")] == [3, 1]
        assert [a.updatetime for a in store.list("alice", since=2)] == [3]
        assert [a.updatetime for a in store.list("alice", min_relevance=2)] == [1]
        assert store.list("carol") == []
        assert store.owners() == ["alice", "bob"]
        first = store.list("alice")[0]
        assert store.get(first.id) == first and store.get("nope") is None


def test_ack_marks_delivered_and_frees_the_digests(aci_store):
    with aci_store as store:
        first, second = aci("alice", 1, 5, "a" * 64), aci("bob", 2, 9, "b" * 64)
        store.add([first, second])
        assert store.undelivered_digests() == {"a" * 64, "b" * 64}
        assert store.ack("bob", [first.id]) == 0  # not bob's
        assert store.ack("alice", [first.id]) == 1
        assert store.ack("alice", [first.id]) == 0
        assert store.undelivered_digests() == {"b" * 64}
        assert store.ack("bob") == 1 and store.undelivered_digests() == set()


def test_store_gc_keeps_a_version_an_undelivered_aci_points_to(project):
    """`scrapy store gc` over three editions of a page, stored here as the recrawl middleware
    stores them (the crawl side: tests/test_recrawl.py)."""
    url = "http://a.test/"
    with open_object_cache(project.settings()) as cache:
        digests = [cache.record_fetch(url, 200, f"<html><body>edition {n}</body></html>".encode(), fetched=1000 + n,
                                      header="HTTP/1.1 200 OK\nContent-Type: text/html", links=[]).meta.digest
                   for n in range(3)]
    with SqliteAciStore(project.data / "aci.sqlite") as store:
        store.add([aci("alice", 1, 5, digests[0], url)])  # alice was not told about edition 0 yet
    gc = project.scrapy("store", "gc", "--keep", "1")
    assert "dropped 1 version(s)" in gc.stdout  # edition 1 goes, edition 0 stays for alice
    with open_object_cache(project.settings()) as cache:
        assert [v.number for v in cache.versions(url)] == [1, 3]
        assert b"edition 0" in cache.get(url, 1)[1]


def test_damaged_rows_cost_their_own_acis_not_the_owners_lists(tmp_path, caplog):
    import sqlite3

    path = tmp_path / "aci.sqlite"
    with SqliteAciStore(path) as store:
        store.add([aci("alice", 1, 5, "a" * 64, "http://a.test/1"), aci("alice", 2, 5, "b" * 64, "http://a.test/2"),
                   aci("bob", 2, 5, "b" * 64, "http://a.test/2"), aci("bob", 3, 5, "c" * 64, "http://a.test/3")])
    with sqlite3.connect(path) as db:  # a disk error cuts alice's index short, a version's keys go bad...
        alice = db.execute("SELECT id FROM aci_owner_number WHERE name = 'alice'").fetchone()[0]
        db.execute(f"UPDATE aci_owner_index SET rows = x'010203' WHERE id & {(1 << 25) - 1} = ?", (alice,))
        page3 = max(p for (p,) in db.execute("SELECT page FROM aci_page_rows"))
        db.execute("UPDATE aci_version SET keys = '[' WHERE id = ?", (page3,))
        page2 = sorted(p for (p,) in db.execute("SELECT page FROM aci_page_rows"))[1]
        db.execute("UPDATE aci_page_rows SET rows = x'0102' WHERE page = ?", (page2,))  # ...and a page's owners
    with SqliteAciStore(path) as store:
        assert store.list("alice") == []  # said, not raised
        assert [a.uri for a in store.list("bob")] == ["http://a.test/2"]
        store.add([aci("carol", 5, 5, "b" * 64, "http://a.test/2"), aci("alice", 4, 5, "d" * 64, "http://a.test/4")])
        assert [a.uri for a in store.list("alice")] == ["http://a.test/4"]  # the store still takes more
        assert [a.uri for a in store.list("carol")] == ["http://a.test/2"]
    assert "damaged" in caplog.text
