"""Owners grouped, not multiplied (issue 23): URDs that share a start page, scope and depth
travel as one group, so a frontier node and a request cost the same for 10 URDs as for
10,000; scope is decided once per link and anchor; a page's ACIs are stored in one
transaction and leave the crawl as one item; the per-owner ACI lists are what judging
each owner alone gives."""

from __future__ import annotations

import json
import pickle
import sqlite3
from decimal import Decimal

import pytest
import redis
from conftest import urd

import webrace.rounds.groups as groups_module
from webrace.annotation.filtering import FilteringProcessor, RoundIndex, Version
from webrace.backends.redis import RedisAciStore
from webrace.backends.sqlite import SqliteAciStore, SqliteUrdStore
from webrace.distributed.registry import RoundRegistry
from webrace.items import AciBatch
from webrace.records.aci import Aci
from webrace.rounds.engine import Counts, Limits
from webrace.rounds.local import LocalRounds
from webrace.rounds.redis import RedisRounds
from webrace.spiders.urd import UrdSpider
from webrace.urd import Keyword, Urd, now_millis

HOUR = 3_600_000
ROOT = "http://a.test/"
SITE = {ROOT: [f"{ROOT}p{i}" for i in range(5)] + ["http://b.test/x"],
        **{f"{ROOT}p{i}": [ROOT, f"{ROOT}p{(i + 1) % 5}"] for i in range(5)}}


def sharing(count: int, url: str = ROOT, depth: int = 2) -> list[Urd]:
    """``count`` URDs of as many owners, all starting at ``url`` with the same depth and scope."""
    return [Urd(id=f"u{n:05d}", owner=f"owner{n:05d}", url=url, depth=depth, timing=HOUR,
                keywords=(Keyword(f"word{n % 7}", Decimal(2)),)) for n in range(count)]


@pytest.fixture(params=["local", "redis"])
def engine_for(request, tmp_path):
    """``engine_for(urds)``: a round engine (local, or Redis with a key prefix of the test's
    own) whose URD-DB holds ``urds``, and the round it opened for them."""
    made = []

    def make(urds: list[Urd], limits: Limits | None = None):
        path = tmp_path / f"urd-{len(made)}.sqlite"
        with SqliteUrdStore(path) as store:
            store.put_many(urds)
        stats = Counts()
        if request.param == "local":
            engine = LocalRounds(lambda: SqliteUrdStore(path), limits, stats)
        else:
            client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
            prefix = request.getfixturevalue("redis_prefix") + f"{len(made)}:"
            engine = RedisRounds(RoundRegistry(client, prefix), lambda: SqliteUrdStore(path), limits, stats)
        made.append(engine)
        return engine, engine.open_due(now_millis())

    return make


def first_node(engine, rnd):
    """The round's first page, as the spider gets it (a lease, for a shared round)."""
    if engine.shared:
        node = rnd.frontier.lease(60_000)
        context = {"link": node.url, "parent": node.parent_url, "depth": node.depth, "budgets": node.budgets}
        return engine.node(rnd.id, context)[1]
    return engine.start(rnd)[0]


def leased(engine, rnd):
    """The next page leased from a shared round (None: none left)."""
    return first_node(engine, rnd) if rnd.frontier.pending() and rnd.frontier.queued() else None


def request_for(engine, rnd, node):
    spider = UrdSpider()
    spider.engine = engine
    return spider._request(rnd, node)


def sizes(engine, rnd, node) -> tuple[int, int, int]:
    """Serialised sizes of the node (pickle) and of its request's meta (pickle, JSON)."""
    meta = request_for(engine, rnd, node).meta
    return len(pickle.dumps(node)), len(pickle.dumps(meta)), len(json.dumps(meta))


def crawl(engine, rnd, site=SITE):
    """Fetch every page the round names (leasing them from a shared round); the released
    items by URL and the nodes fetched."""
    items, nodes = {}, []
    queue = [] if engine.shared else list(engine.start(rnd))
    while True:
        node = leased(engine, rnd) if engine.shared else (queue.pop(0) if queue else None)
        if node is None:
            break
        nodes.append(node)
        node.links = list(site.get(node.url, []))
        step = engine.fetched(rnd, node, {"url": node.url})
        queue += step.fetch
        items.update((n.url, item) for n, item in step.items)
    items.update((n.url, item) for n, item in engine.flush().items)
    return items, nodes


# -- one node, one request: the same size for 10 URDs or 10,000 -----------------------------


def test_a_node_and_its_request_are_the_same_size_for_10_and_10000_urds_sharing_a_start_page(engine_for):
    few_engine, few_round = engine_for(sharing(10))
    many_engine, many_round = engine_for(sharing(10_000))
    few_node, many_node = first_node(few_engine, few_round), first_node(many_engine, many_round)
    assert few_node.budgets == many_node.budgets == {"u00000": 2}  # one group, named by its first URD
    assert sizes(few_engine, few_round, few_node) == sizes(many_engine, many_round, many_node)
    if many_engine.shared:  # the node as Redis keeps it, too
        few_raw = few_round.frontier.client.hget(few_round.frontier.keys["nodes"], ROOT)
        many_raw = many_round.frontier.client.hget(many_round.frontier.keys["nodes"], ROOT)
        assert len(few_raw) == len(many_raw)


def test_the_children_of_a_page_are_the_same_size_for_10_and_10000_urds(engine_for):
    measured = []
    for count in (10, 10_000):
        engine, rnd = engine_for(sharing(count))
        node = first_node(engine, rnd)
        node.links = list(SITE[ROOT])
        engine.fetched(rnd, node, {"url": ROOT})
        child = first_node(engine, rnd) if engine.shared else rnd.frontier.get(f"{ROOT}p0")
        measured.append(sizes(engine, rnd, child))
    assert measured[0] == measured[1]


def test_owners_are_expanded_on_the_page_item_only(engine_for):
    engine, rnd = engine_for(sharing(10_000))
    items, nodes = crawl(engine, rnd)
    assert sorted(items) == [ROOT, *(f"{ROOT}p{i}" for i in range(5))]  # b.test is out of scope
    item = items[f"{ROOT}p3"]
    assert len(item["owners"]) == 10_000 and item["urd_ids"] == [u.id for u in sharing(10_000)]
    assert all(n.budgets.keys() == {"u00000"} for n in nodes)
    assert engine.stats["webrace/coalesced"] >= 9_999  # the group's other start pages


def test_groups_split_by_start_page_scope_and_depth(engine_for):
    urds = [*sharing(3), Urd(id="deep", owner="dora", url=ROOT, depth=3, timing=HOUR),
            Urd(id="wide", owner="walt", url=ROOT, depth=2, scope="any", timing=HOUR),
            Urd(id="other", owner="olga", url=f"{ROOT}p1", depth=0, timing=HOUR)]
    engine, rnd = engine_for(urds)
    assert sorted((g.id, g.members) for g in rnd.groups) == [
        ("deep", ("deep",)), ("other", ("other",)), ("u00000", ("u00000", "u00001", "u00002")), ("wide", ("wide",))]
    items, _ = crawl(engine, rnd)
    assert items["http://b.test/x"]["owners"] == ["walt"]  # only the URD whose scope is "any"
    assert items[f"{ROOT}p1"]["urd_ids"] == ["deep", "other", "u00000", "u00001", "u00002", "wide"]


def test_every_member_of_a_group_keeps_its_own_page_budget(engine_for):
    engine, rnd = engine_for(sharing(3), Limits(page_budget=2))
    items, nodes = crawl(engine, rnd)
    assert len(nodes) == 2
    assert all(engine.stats[f"webrace/budget_reached/{u.id}"] == 2 for u in sharing(3))
    assert all(len(item["owners"]) == 3 for item in items.values())


def test_scope_is_decided_once_per_link_and_anchor_not_per_urd(monkeypatch, tmp_path):
    calls = []
    real = groups_module.hostname
    monkeypatch.setattr(groups_module, "hostname", lambda url: calls.append(url) or real(url))
    few, many = [], []
    for count, seen in ((10, few), (2_000, many)):
        with SqliteUrdStore(tmp_path / f"{count}.sqlite") as store:
            store.put_many(sharing(count))
        engine = LocalRounds(lambda count=count: SqliteUrdStore(tmp_path / f"{count}.sqlite"))
        calls.clear()
        crawl(engine, engine.open_due(now_millis()))
        seen.extend(calls)
    assert len(many) == len(few) <= sum(len(links) for links in SITE.values()) + len(SITE)


# -- a page's ACIs: one transaction, one item -----------------------------------------------


def acis_of_a_page(owners: list[str], url: str = "http://a.test/page") -> list[Aci]:
    return [Aci(owner=o, uri=url, relevance=n + 1.0, updatetime=1_700_000_000_000 + n, filesize=10, version=1,
                docbase="d" * 64, summary=f"about {o}") for n, o in enumerate(owners)]


def test_a_page_whose_store_fails_half_way_keeps_none_of_its_acis(tmp_path):
    path = tmp_path / "aci.sqlite"
    with SqliteAciStore(path) as store:
        store.add(acis_of_a_page(["before"], "http://a.test/earlier"))
    with sqlite3.connect(path) as conn:  # the page of four owners cannot be written (its version row can)
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON aci_page_rows WHEN NEW.owners = 4 "
                     "BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
    with SqliteAciStore(path) as store:
        with pytest.raises(sqlite3.IntegrityError, match="disk says no"):
            store.add(acis_of_a_page(["alice", "bob", "carol", "dave"]))
        assert store.owners() == ["before"]
        assert [store.list(o) for o in ("alice", "bob")] == [[], []]


OLD_ACI_SCHEMA = """
CREATE TABLE aci (id TEXT PRIMARY KEY, owner TEXT NOT NULL, updatetime INTEGER NOT NULL, relevance REAL NOT NULL,
                  docbase TEXT NOT NULL, delivered INTEGER NOT NULL DEFAULT 0, xml TEXT NOT NULL);
CREATE INDEX aci_owner ON aci(owner, updatetime);
"""


def test_acis_read_back_as_their_xml_gave_them_and_an_old_store_keeps_working(tmp_path):
    path = tmp_path / "aci.sqlite"
    old = acis_of_a_page(["alice"], "http://a.test/old")
    with sqlite3.connect(path) as conn:  # an ACI store as WebRACE wrote it before aci_page
        conn.executescript(OLD_ACI_SCHEMA)
        conn.executemany("INSERT INTO aci VALUES (?, ?, ?, ?, ?, 0, ?)",
                         [(a.id, a.owner, a.updatetime, a.relevance, a.docbase, a.to_xml()) for a in old])
    tricky = [Aci(owner=o, uri="http://a.test/new", relevance=0.1 * 3 + n * 1234567.0, updatetime=1_800_000_000_000,
                  filesize=5, version=2, docbase="e" * 64, summary="bell \x07 rang", urgent=bool(n), title="T\x00")
              for n, o in enumerate(["alice", "bob"])]
    with SqliteAciStore(path) as store:
        assert store.add(tricky) == 2 and store.add(tricky) == 0
        assert store.list("alice") == [Aci.from_xml(a.to_xml()) for a in (tricky[0], old[0])]  # newest first
        assert store.get(tricky[1].id) == Aci.from_xml(tricky[1].to_xml())
        assert store.undelivered_digests() == {"d" * 64, "e" * 64}
        assert store.ack("alice") == 2 and store.undelivered_digests() == {"e" * 64}


def test_a_page_of_acis_is_one_call_to_redis_and_all_or_none(redis_url, redis_prefix):
    client = redis.Redis.from_url(redis_url)
    store = RedisAciStore(client, redis_prefix)
    calls = []
    script = store._add
    store._add = lambda **kw: calls.append(kw) or script(**kw)
    page = acis_of_a_page([f"o{n}" for n in range(50)])
    assert store.add(page) == 50 and len(calls) == 1
    assert store.add(page) == 0  # a repeat is ignored
    assert [a.relevance for a in store.list("o7")] == [8.0]
    client.set(f"{redis_prefix}aci:owner:carol", "not a sorted set")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        store.add(acis_of_a_page(["alice", "bob", "carol"], "http://a.test/other"))
    assert store.list("alice") == [] and store.list("bob") == []


def test_a_batch_item_holds_the_acis_of_one_page():
    batch = AciBatch("http://a.test/page", acis_of_a_page(["alice", "bob"]))
    assert [a.owner for a in batch.acis] == ["alice", "bob"]
    assert {a.uri for a in batch.acis} == {batch.url}


# -- the per-owner ACI lists: as judging each owner alone gives -------------------------------

PAGES = {
    "/": ("Java and Python jobs. Research on crawlers.", ["/a.html", "/b.html"]),
    "/a.html": ("Java research, more java, and research again.", ["/c.html"]),
    "/b.html": ("Nothing here but Python.", []),
    "/c.html": ("Deep research on Java crawlers in Python.", []),
}
URDS = [  # alice and bob share a group; carol's depth and dave's start page differ
    ("a", "alice", "/", 2, {"java": 2, "research": 1}),
    ("b", "bob", "/", 2, {"python": 3}),
    ("c", "carol", "/", 1, {"java": 1, "crawlers": 4}),
    ("d", "dave", "/a.html", 1, {"research": 5}),
]


def reachable(start: str, depth: int) -> set[str]:
    seen, frontier = {start}, [start]
    for _ in range(depth):
        frontier = [link for path in frontier for link in PAGES[path][1] if link not in seen]
        seen.update(frontier)
    return seen


def expected_acis(site) -> dict[str, list[tuple[str, float, str]]]:
    """Each owner's ACIs, judging every page the owner's URD reaches for that owner alone."""
    processor = FilteringProcessor()
    out: dict[str, list] = {}
    for urd_id, owner, start, depth, keywords in URDS:
        mine = Urd(id=urd_id, owner=owner, url=site.url(start), depth=depth, timing=HOUR,
                   keywords=tuple(Keyword(k, Decimal(w)) for k, w in keywords.items()))
        for path in reachable(start, depth):
            body = site.routes[(None, path)][2]
            version = Version(site.url(path), body, "text/html", "text/html", "x" * 64, 1, 0, len(body))
            for aci in processor.judge(version, [mine], RoundIndex.build([mine])).acis:
                out.setdefault(owner, []).append((aci.uri, aci.relevance, aci.summary))
    return {owner: sorted(acis) for owner, acis in out.items()}


def test_each_owners_acis_from_a_crawl_are_what_judging_that_owner_alone_gives(site, project):
    for path, (text, links) in PAGES.items():
        site.html(path, links, text)
    project.add_urds(*(urd(i, o, site.url(s), depth=d, keywords=k) for i, o, s, d, k in URDS))
    run = project.crawl()
    assert run.returncode == 0, run.stderr
    expected = expected_acis(site)
    assert sorted(expected) == ["alice", "bob", "carol", "dave"]
    fed = {}
    for aci in run.acis:  # the feed: one ACI per line, though each page's left as one item
        fed.setdefault(aci["owner"], []).append((aci["uri"], aci["relevance"], aci["summary"]))
    assert {o: sorted(a) for o, a in fed.items()} == expected
    assert run.stat("webrace/acis") == sum(len(a) for a in expected.values())
    with SqliteAciStore(project.data / "aci.sqlite") as store:  # the store's per-owner split
        assert {o: sorted((a.uri, a.relevance, a.summary) for a in store.list(o)) for o in expected} == expected
    listed = project.scrapy("aci", "list", "--owner", "alice", "--format", "jsonl")  # what the command reads
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted((r["uri"], r["relevance"], r["summary"]) for r in rows) == expected["alice"]


# -- URDs parsed once, at add -----------------------------------------------------------------

OLD_URD_SCHEMA = """
CREATE TABLE urd (id TEXT PRIMARY KEY, owner TEXT NOT NULL, url TEXT NOT NULL,
                  next_due INTEGER NOT NULL, xml TEXT NOT NULL);
CREATE INDEX urd_next_due ON urd(next_due);
"""


def test_an_old_urd_db_gets_its_columns_on_open_and_no_crawl_parses_xml_again(tmp_path, monkeypatch):
    path = tmp_path / "urd.sqlite"
    urds = [*sharing(3), Urd(id="z", owner="zoe", url=ROOT, depth=1, timing=HOUR, lastcheck=HOUR,
                             threshold=Decimal("2.5"), urgent=True, scope="domain")]
    with sqlite3.connect(path) as conn:  # a URD-DB as WebRACE wrote it before the columns
        conn.executescript(OLD_URD_SCHEMA)
        conn.executemany("INSERT INTO urd VALUES (?, ?, ?, ?, ?)",
                         [(u.id, u.owner, u.url, u.next_due, u.to_xml()) for u in urds])
    with SqliteUrdStore(path) as store:  # the migration parses each XML once
        assert store.all() == sorted(urds, key=lambda u: u.id)
    monkeypatch.setattr(Urd, "from_xml", classmethod(lambda cls, text: pytest.fail("XML parsed again")))
    with SqliteUrdStore(path) as store:
        assert store.get("z") == urds[-1] and [u.id for u in store.due(0)] == ["u00000", "u00001", "u00002"]
        store.mark_checked(["z"], 5 * HOUR)
        assert store.get("z").lastcheck == 5 * HOUR and store.get("z").next_due == 6 * HOUR


def test_a_round_keeps_its_urds_as_fields_and_still_reads_a_round_of_xml(redis_url, redis_prefix):
    client = redis.Redis.from_url(redis_url)
    registry = RoundRegistry(client, redis_prefix)
    urds = sharing(3)
    round_id = registry.open(urds, 1000)
    stored = client.hget(f"{redis_prefix}round:{round_id}:urds", "u00000")
    assert json.loads(stored)["keywords"] == "word0\x1f2"  # no XML to parse
    assert registry.urds(round_id) == {u.id: u for u in urds}
    client.hset(f"{redis_prefix}round:{round_id}:urds", "u00001", urds[1].to_xml())  # an older scheduler's
    assert registry.urds(round_id)["u00001"] == urds[1]
