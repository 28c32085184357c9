"""A page judged for all its owners at once, its ACIs as columns (issue 23): the same ACIs as
judging each owner alone; stored in one statement a page, read back per owner through an
owner index kept up in bulk; threads' pages written together, a refused page alone; feeds
that take no ACIs never make them. In-process: no crawl."""

from __future__ import annotations

import sqlite3
import threading
from decimal import Decimal
from random import Random

import numpy as np
import pytest
from scrapy.extensions.feedexport import ItemFilter
from scrapy.utils.test import get_crawler

import webrace.backends.sqlite.aci as sqlite_aci
from webrace.annotation.filtering import FilteringProcessor, RoundIndex, Version
from webrace.backends.sqlite.aci import SqliteAciStore, _Pending
from webrace.exporters import FeedExporter
from webrace.items import AciBatch, Page
from webrace.records.aci import Aci, PageAcis, owner_key, page_key, split_id
from webrace.urd import Keyword, Urd

HOUR = 3_600_000
WORDS = [f"w{n}" for n in range(60)] + ["c++", "web crawler", "e-mail"]


def world(seed: int = 5) -> tuple[list[Urd], list[Version]]:
    """URDs of many owners (some with two or three URDs, thresholds, urgency, phrases and
    literal keywords, fractional weights) and pages of text drawn from the same words."""
    rng = Random(seed)
    urds = []
    for n in range(240):
        owner = f"o{rng.randrange(150):03d}"
        kws = tuple(Keyword(k, Decimal(rng.choice(["1", "2.5", "0.1", "3", "-1"]))) for k in rng.sample(WORDS, 4))
        threshold = rng.choice([None, None, Decimal("0.3"), Decimal("4")])
        urds.append(Urd(id=f"u{n:03d}", owner=owner, url="http://a.test/", depth=2, timing=HOUR, keywords=kws,
                        threshold=threshold, urgent=rng.random() < 0.2))
    urds.append(Urd(id="archive", owner="keeper", url="http://a.test/", depth=2, timing=HOUR))
    pages = []
    for p in range(25):
        words = [rng.choice(WORDS) if rng.random() < 0.3 else f"filler{rng.randrange(500)}" for _ in range(400)]
        body = f"<html><title>Page {p}</title><body><p>{' '.join(words)}</p></body></html>".encode()
        pages.append(Version(f"http://a.test/{p}", body, "text/html", "text/html", f"{p:064x}", 1, 10_000 + p,
                             len(body)))
    return urds, pages


def as_tuples(acis) -> list[tuple]:
    return [(a.owner, a.uri, a.relevance, a.summary, a.urgent, a.title, a.id) for a in acis]


def test_judging_every_owner_at_once_gives_each_owner_what_judging_them_alone_gives():
    urds, pages = world()
    processor = FilteringProcessor()
    index = RoundIndex.build(urds)
    owners = sorted({u.owner for u in urds})
    made = 0
    for version in pages:
        together = processor.judge(version, urds, index)
        assert isinstance(together.acis, PageAcis) or together.acis == []
        assert together.archived and together.filtered
        alone = []
        for owner in owners:
            mine = [u for u in urds if u.owner == owner]
            alone += as_tuples(processor.judge(version, mine, RoundIndex.build(mine)).acis)
        assert as_tuples(together.acis) == alone
        made += len(alone)
    assert made > 500  # the world is not empty


def test_an_aci_id_names_its_page_version_and_its_owner_and_an_older_id_is_kept():
    aci = Aci(owner="alice", uri="http://a.test/", relevance=1, updatetime=1, filesize=1, version=1,
              docbase="d" * 64, summary="s")
    assert split_id(aci.id) == (page_key("http://a.test/", "d" * 64), owner_key("alice"))
    older = Aci(owner="alice", uri="http://a.test/", relevance=1, updatetime=1, filesize=1, version=1,
                docbase="d" * 64, summary="s", id="3f2a9c0b1d2e4f5a")
    assert Aci.from_xml(older.to_xml()).id == "3f2a9c0b1d2e4f5a"


def judged_pages(count: int = 12) -> list[PageAcis]:
    urds, pages = world(9)
    processor = FilteringProcessor()
    index = RoundIndex.build(urds)
    return [j.acis for j in (processor.judge(v, urds, index) for v in pages[:count]) if j.acis]


def test_an_owners_list_reads_the_pages_the_owner_index_holds_and_those_past_it(tmp_path, monkeypatch):
    pages = judged_pages()
    # the index is brought up once past the first half of the pages; the last ones stay past it
    monkeypatch.setattr(sqlite_aci, "_TAIL_ROWS", sum(map(len, pages[:len(pages) // 2])))
    expected: dict[str, list[tuple]] = {}
    for page in pages:
        for aci in page:
            expected.setdefault(aci.owner, []).append(aci)
    path = tmp_path / "aci.sqlite"
    with SqliteAciStore(path) as store:
        for page in pages:
            assert store.add(page) == len(page)
        indexed = store._indexed()
        assert 0 < indexed < store.conn.execute("SELECT max(page) FROM aci_page_rows").fetchone()[0]  # some past it
        for owner, acis in expected.items():
            listed = store.list(owner)
            assert sorted(as_tuples(listed)) == sorted(as_tuples(Aci.from_xml(a.to_xml()) for a in acis))
            assert store.get(listed[0].id) == listed[0]
        assert store.owners() == sorted(expected)
    with SqliteAciStore(path) as store:  # closing brought the index up to the last page
        last = store.conn.execute("SELECT max(page) FROM aci_page_rows").fetchone()[0]
        assert store._tail == 0 and store._indexed() == last
        first = pages[0]  # more owners of an indexed page: read back through the index too
        late = Aci(owner="newcomer", uri=first.uri, relevance=7, updatetime=first.updatetime, filesize=first.filesize,
                   version=first.version, docbase=first.docbase, summary="late")
        assert store.add([late]) == 1 and store.add([late]) == 0
        assert [a.summary for a in store.list("newcomer")] == ["late"]
        monkeypatch.setattr(store, "_tail", 0)
        assert store.ack("newcomer", [late.id]) == 1 and store.ack("newcomer") == 0


def test_the_owner_index_grows_by_appended_runs_and_a_store_of_a_row_per_aci_is_moved_to_blobs(tmp_path, monkeypatch):
    pages = judged_pages()
    monkeypatch.setattr(sqlite_aci, "_TAIL_ROWS", len(pages[0]))  # a run every page or two
    path = tmp_path / "aci.sqlite"
    with SqliteAciStore(path) as store:
        for page in pages:
            store.add(page)
        before = {o: as_tuples(store.list(o)) for o in store.owners()}
        runs = [r for (r,) in store.conn.execute("SELECT run FROM aci_runs ORDER BY run")]
        assert len(runs) > 2 and runs[-1] == store._indexed()  # each run labelled by its last page
        alice = store.owners()[0]
        first_id = store.list(alice)[0].id
        assert store.ack(alice, [first_id]) == 1
        # the layout before: a row per ACI (its delivered flag in it), an owner index of rows
        store.conn.executescript("""
            CREATE TABLE aci_row (page INTEGER NOT NULL, owner INTEGER NOT NULL, relevance INTEGER NOT NULL,
                summary INTEGER NOT NULL, flags INTEGER NOT NULL, delivered INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (page, owner)) WITHOUT ROWID;
            CREATE TABLE aci_by_owner (owner INTEGER NOT NULL, page INTEGER NOT NULL, PRIMARY KEY (owner, page))
                WITHOUT ROWID;""")
        for page, blob in store.conn.execute("SELECT page, rows FROM aci_page_rows").fetchall():
            for n in np.frombuffer(blob, dtype="<i8").tolist():
                delivered = store.conn.execute("SELECT count(*) FROM aci_delivered WHERE page = ? AND owner = ?",
                                               (page, n >> 38)).fetchone()[0]
                store.conn.execute("INSERT INTO aci_row VALUES (?, ?, ?, ?, ?, ?)",
                                   (page, n >> 38, (n >> 2) & 262143, (n >> 20) & 262143, n & 3, delivered))
        store.conn.executescript("""DELETE FROM aci_page_rows; DELETE FROM aci_owner_index; DELETE FROM aci_runs;
            DELETE FROM aci_delivered; UPDATE aci_meta SET value = 0;""")
    with SqliteAciStore(path) as store:
        assert store.conn.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('aci_row', 'aci_by_owner')"
                                  ).fetchone()[0] == 0
        assert {o: as_tuples(store.list(o)) for o in store.owners()} == before
        assert store.ack(alice, [first_id]) == 0  # still delivered
        assert store.ack(alice) == len(before[alice]) - 1


def test_pages_added_together_share_a_transaction_and_a_refused_page_fails_alone(tmp_path):
    pages = judged_pages(4)
    path = tmp_path / "aci.sqlite"
    victim = pages[2].owners[0]
    with SqliteAciStore(path) as store:
        store._owner_numbers({o for p in pages for o in p.owners})
        store.conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON aci_page_rows WHEN NEW.page "
                           f"IN (SELECT id FROM aci_version WHERE uri = '{pages[2].uri}') "
                           f"BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
        batch = [_Pending([page]) for page in pages]
        store._write(batch)
        assert [e.done for e in batch] == [True] * 4
        assert [e.error is None for e in batch] == [True, True, False, True]
        assert "disk says no" in str(batch[2].error)
        assert [e.added for e in batch] == [len(pages[0]), len(pages[1]), 0, len(pages[3])]
        assert not [a for a in store.list(victim) if a.uri == pages[2].uri]  # none of the refused page's ACIs


def test_threads_adding_at_once_all_get_their_own_count(tmp_path):
    pages = judged_pages()
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        counts: dict[int, int] = {}
        threads = [threading.Thread(target=lambda n=n: counts.__setitem__(n, store.add(pages[n])))
                   for n in range(len(pages))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert counts == {n: len(page) for n, page in enumerate(pages)}


def test_a_feed_that_takes_no_acis_never_makes_them(tmp_path):
    class Unrolled(Exception):
        pass

    def acis():
        raise Unrolled  # an ACI would be made only to be thrown away
        yield

    feeds = {str(tmp_path / "out.jsonl"): {"format": "jsonlines"}}
    exporter = FeedExporter.from_crawler(get_crawler(settings_dict={"FEEDS": feeds}))

    class Slot:
        def __init__(self, classes):
            self.filter = ItemFilter({"item_classes": classes})

    exporter.slots = [Slot([Page])]
    exporter.item_scraped(AciBatch("http://a.test/", acis()), None)  # not one ACI made
    assert not exporter._takes_acis()
    exporter.slots = [Slot([Page]), Slot([Aci])]
    assert exporter._takes_acis()
    exporter.slots = [Slot([Page]), Slot([])]  # a feed of every item
    assert exporter._takes_acis()

    class Picky(ItemFilter):  # a filter of one's own may look into any ACI: each is made
        def accepts(self, item):
            return getattr(item, "owner", "") == "alice"

    exporter.slots = [Slot([Page])]
    exporter.slots[0].filter = Picky({})
    assert exporter._takes_acis()


def test_a_page_too_varied_for_one_row_layout_is_refused_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_aci, "_FIELD_MAX", 2)
    page = judged_pages(1)[0]
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        if len(page.keys) <= 2 and len(set(page.relevance)) <= 2:
            pytest.fail("the page should have more than two summaries or relevances")
        with pytest.raises(ValueError, match="distinct summaries or relevances"):
            store.add(page)
        assert store.owners() == []
    with sqlite3.connect(tmp_path / "aci.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM aci_version").fetchone()[0] == 0


def test_an_owner_first_seen_on_a_refused_page_is_still_stored_with_a_later_page(tmp_path):
    def page(uri: str) -> list[Aci]:
        return [Aci(owner="newcomer", uri=uri, relevance=2, updatetime=5, filesize=1, version=1, docbase="e" * 64,
                    summary="s")]

    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        store.conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON aci_page_rows WHEN NEW.page IN "
                           "(SELECT id FROM aci_version WHERE uri = 'http://a.test/bad') "
                           "BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
        with pytest.raises(sqlite3.IntegrityError):
            store.add(page("http://a.test/bad"))  # the owner's number was given in the rolled back transaction
        assert store.add(page("http://a.test/good")) == 1
        assert [a.uri for a in store.list("newcomer")] == ["http://a.test/good"]


def test_a_summary_made_when_read_is_the_one_judging_made_whatever_the_characters(tmp_path):
    text = ("Bell \x07 rang. " * 3 + "Notes on the w1 crawler \U0001d518 ünïcödé 漢字 and more w1 text. "
            + "Filler words here. " * 12 + "Another w2 place, \ufffe odd.")
    body = f"<html><title>T\x01itle</title><body><p>{text}</p><p><a href='/x'>w2 in a link</a></p></body></html>"
    urds = [Urd(id=f"u{n}", owner=f"o{n}", url="http://a.test/", depth=1, timing=HOUR,
                keywords=(Keyword("w1", Decimal(n + 1)), Keyword("w2", Decimal(3 - n)))) for n in range(3)]
    version = Version("http://a.test/p", body.encode(), "text/html; charset=utf-8", "text/html", "f" * 64, 1, 5,
                      len(body))
    judged = FilteringProcessor().judge(version, urds, RoundIndex.build(urds)).acis
    made = {a.owner: a for a in judged}
    assert len(made) == 3 and all("w1" in a.summary or "w2" in a.summary for a in made.values())
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        store.add(judged)
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        for owner, aci in made.items():
            (read,) = store.list(owner)
            assert read.summary == Aci.from_xml(aci.to_xml()).summary  # as its XML keeps it


PREVIOUS_ACI_SCHEMA = """
CREATE TABLE aci (id TEXT PRIMARY KEY, owner TEXT NOT NULL, updatetime INTEGER NOT NULL, relevance REAL NOT NULL,
                  docbase TEXT NOT NULL, delivered INTEGER NOT NULL DEFAULT 0, xml TEXT NOT NULL, page INTEGER,
                  summary TEXT, urgent INTEGER, expired INTEGER);
CREATE INDEX aci_owner ON aci(owner, updatetime);
CREATE TABLE aci_page (id INTEGER PRIMARY KEY, uri TEXT NOT NULL, docbase TEXT NOT NULL, version INTEGER NOT NULL,
                       updatetime INTEGER NOT NULL, filesize INTEGER NOT NULL, format TEXT NOT NULL,
                       extension TEXT NOT NULL, title TEXT NOT NULL,
                       UNIQUE (uri, docbase, version, updatetime, filesize, format, extension, title));
"""


def test_a_store_of_the_page_and_row_layout_before_keeps_its_acis_ids_and_deliveries(tmp_path):
    """An aci.sqlite as the previous layout wrote it (a row per ACI pointing at its page's
    fields): its ACIs are listed with their own ids, acknowledged, kept from gc, beside new ones."""
    path = tmp_path / "aci.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(PREVIOUS_ACI_SCHEMA)
        conn.execute("INSERT INTO aci_page VALUES (1, 'http://a.test/old', ?, 3, 1000, 50, 'html', 'html', 'Old')",
                     ("c" * 64,))
        conn.executemany("INSERT INTO aci VALUES (?, ?, 1000, ?, '', ?, '', 1, ?, ?, 0)",
                         [("0123456789abcdef", "alice", 4.0, 0, "old about alice", 1),
                          ("fedcba9876543210", "bob", 2.5, 1, "old about bob", 0)])
    new = Aci(owner="alice", uri="http://a.test/new", relevance=1.5, updatetime=2000, filesize=9, version=1,
              docbase="d" * 64, summary="new")
    with SqliteAciStore(path) as store:
        assert store.add([new]) == 1
        listed = store.list("alice")
        assert [(a.id, a.uri, a.summary, a.urgent) for a in listed] == [
            (new.id, "http://a.test/new", "new", False),
            ("0123456789abcdef", "http://a.test/old", "old about alice", True)]
        assert store.get("0123456789abcdef").title == "Old" and store.owners() == ["alice", "bob"]
        assert store.undelivered_digests() == {"c" * 64, "d" * 64}
        assert store.ack("alice", ["0123456789abcdef"]) == 1 and store.ack("alice") == 1
        assert store.undelivered_digests() == set()


def test_a_version_judged_for_some_owners_then_for_others_keeps_every_owners_summary(tmp_path):
    """Two judgements of one page version (two rounds' URDs) stored one after the other: the
    second's keyword lists go after the first's, and each owner reads their own summary."""
    urds, pages = world(7)
    processor = FilteringProcessor()
    first_urd = {}
    for urd in urds:
        first_urd.setdefault(urd.owner, urd)
    parts = ([u for u in first_urd.values() if u.owner < "o050"],  # one URD an owner: keys as arrays
             [u for u in first_urd.values() if "o050" <= u.owner < "o100"],
             [u for u in urds if u.owner >= "o100"])  # owners of several URDs: keys as a list
    judged = [processor.judge(pages[3], part, RoundIndex.build(part)).acis for part in parts]
    assert [type(j.keys).__name__ for j in judged] == ["Keys", "Keys", "list"]
    assert all(len(j.keys) > 3 for j in judged)
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        assert [store.add(j) for j in judged] == [len(j) for j in judged]
        for page in judged:
            for aci in page:
                assert as_tuples(store.list(aci.owner)) == as_tuples([Aci.from_xml(aci.to_xml())])
