"""One contract, two round engines: local (embedded) and Redis (distributed), in-process.

A site is a dict URL -> links; the driver plays the part of the spider (and, for the Redis
engine, of the workers leasing pages): it fetches what the engine names, tells it the
page's links, and collects the items the engine releases.
"""

from __future__ import annotations

import pytest
import redis

from webrace.backends.sqlite import SqliteUrdStore
from webrace.distributed.registry import RoundRegistry
from webrace.records.rounds import FAILED
from webrace.rounds.engine import Counts, Limits
from webrace.rounds.local import LocalRounds
from webrace.rounds.redis import RedisRounds
from webrace.urd import Urd, now_millis

HOUR = 3_600_000


@pytest.fixture(params=["local", "redis"])
def make_engine(request, tmp_path):
    path = tmp_path / "urd.sqlite"

    def store():
        return SqliteUrdStore(path)

    def make(limits=None):
        stats = Counts()
        if request.param == "local":
            return LocalRounds(store, limits, stats)
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        prefix = request.getfixturevalue("redis_prefix")
        return RedisRounds(RoundRegistry(client, prefix), store, limits, stats)

    make.store = store
    return make


def add(store_factory, *urds):
    with store_factory() as store:
        store.put_many(urds)


def crawl(engine, rnd, site, fail=(), redirects=None):
    """Fetch every page the round names; return the released items by URL and the fetches
    (``redirects``: URL -> where it redirects, followed as the redirect middleware does)."""
    items, fetched = {}, []
    queue = list(engine.start(rnd))
    while True:
        if engine.shared:
            leased = rnd.frontier.lease(60_000)
            if leased is None:
                break
            context = {"link": leased.url, "parent": leased.parent_url, "depth": leased.depth,
                       "budgets": leased.budgets}
            _, node = engine.node(rnd.id, context)
        else:
            if not queue:
                break
            node = queue.pop(0)
        fetched.append(node.url)
        url, step = node.url, None
        while redirects and url in redirects and step is None:
            claimed, gained, state = engine.claim_redirect(rnd, node, redirects[url])
            if claimed:
                url = redirects[url]
                fetched.append(url)
            else:
                step = engine.redirect_seen(rnd, node, redirects[url], gained, state)
        if step is not None:
            pass
        elif node.url in fail:
            step = engine.finish(rnd, node, FAILED)
        else:
            node.answered_from = url if url != node.url else None
            node.links = list(site.get(url, []))
            step = engine.fetched(rnd, node, {"url": url, "depth": node.depth, "parent_url": node.parent_url})
        queue += step.fetch
        write(engine, step, items)
    write(engine, engine.flush(), items)
    return items, fetched


def write(engine, step, items):
    """The adapter's part: emit the released items, then tell the engine they are written."""
    for node, item in step.items:
        assert item["url"] not in items, "an item released twice"
        items[item["url"]] = item
        engine.written(item["round"], [node.url])


SITE = {
    "http://a.test/": ["http://a.test/1", "http://a.test/2", "http://b.test/"],
    "http://a.test/1": ["http://a.test/1/x", "http://a.test/"],
    "http://a.test/2": ["http://a.test/1/x"],
    "http://a.test/1/x": ["http://a.test/1/x/deep"],
    "http://b.test/": ["http://b.test/p"],
}


def test_a_page_reached_by_two_urds_is_fetched_once_with_both_owners(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="ann", url="http://a.test/", depth=1, timing=HOUR, scope="any"),
        Urd(id="u2", owner="bob", url="http://a.test/", depth=0, timing=HOUR))
    rnd = engine.open_due(now_millis())
    items, fetched = crawl(engine, rnd, SITE)
    assert sorted(fetched) == ["http://a.test/", "http://a.test/1", "http://a.test/2", "http://b.test/"]
    assert items["http://a.test/"]["owners"] == ["ann", "bob"]
    assert items["http://a.test/"]["urd_ids"] == ["u1", "u2"]
    assert items["http://a.test/1"]["owners"] == ["ann"]
    assert engine.stats["webrace/coalesced"] >= 1


def test_each_urd_follows_its_own_depth_and_scope(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="deep", owner="ann", url="http://a.test/", depth=3, timing=HOUR, scope="host"),
        Urd(id="other", owner="bob", url="http://b.test/", depth=1, timing=HOUR, scope="any"))
    rnd = engine.open_due(now_millis())
    items, fetched = crawl(engine, rnd, SITE)
    assert "http://a.test/1/x/deep" in fetched  # depth 3 from a.test
    assert items["http://b.test/"]["urd_ids"] == ["other"]  # a.test's URD keeps to its host
    assert "http://b.test/p" in items and items["http://b.test/p"]["owners"] == ["bob"]
    assert items["http://b.test/p"]["urd_ids"] == ["other"]


def test_an_item_waits_until_no_active_urd_could_add_its_owner(make_engine):
    # "slow" reaches /1/x only at depth 2, after "fast" has fetched it (depth 1 from /2... ):
    # the item must carry both owners, released once.
    site = {
        "http://a.test/": ["http://a.test/s1"],
        "http://a.test/s1": ["http://a.test/s2"],
        "http://a.test/s2": ["http://a.test/shared"],
        "http://a.test/f": ["http://a.test/shared"],
    }
    engine = make_engine()
    add(make_engine.store, Urd(id="slow", owner="ann", url="http://a.test/", depth=3, timing=HOUR),
        Urd(id="fast", owner="bob", url="http://a.test/f", depth=1, timing=HOUR))
    rnd = engine.open_due(now_millis())
    items, fetched = crawl(engine, rnd, site)
    assert fetched.count("http://a.test/shared") == 1
    assert items["http://a.test/shared"]["owners"] == ["ann", "bob"]
    assert items["http://a.test/shared"]["round"] == rnd.id


def test_a_failed_page_ends_its_urds_and_releases_what_waited(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="ann", url="http://a.test/", depth=2, timing=HOUR))
    rnd = engine.open_due(now_millis())
    items, fetched = crawl(engine, rnd, SITE, fail={"http://a.test/1"})
    assert "http://a.test/1" not in items and "http://a.test/1/x" in items  # reached through /2
    assert engine.held() == 0


def test_the_page_budget_stops_a_urd_and_says_so(make_engine):
    engine = make_engine(Limits(page_budget=2))
    add(make_engine.store, Urd(id="u1", owner="ann", url="http://a.test/", depth=5, timing=HOUR))
    rnd = engine.open_due(now_millis())
    _, fetched = crawl(engine, rnd, SITE)
    assert len(fetched) == 2
    assert engine.stats["webrace/budget_reached/u1"] == 2


def test_closing_a_round_checks_its_urds_and_they_are_due_again_after_their_timing(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="ann", url="http://a.test/", depth=0, timing=HOUR))
    opened = now_millis()
    rnd = engine.open_due(opened)
    assert rnd is not None and rnd.real_urds == ["u1"]
    assert engine.open_due(opened) is None  # busy: the open round crawls it
    crawl(engine, rnd, SITE)
    assert [r.id for r in engine.close_finished()] == [rnd.id]
    with make_engine.store() as store:
        urd = store.get("u1")
    assert urd.lastcheck == rnd.started_ms and urd.next_due == rnd.started_ms + HOUR
    assert engine.open_due(opened + 1) is None
    assert engine.open_due(rnd.started_ms + HOUR) is not None


def test_an_explicit_due_during_a_round_survives_its_closing(make_engine):
    """`scrapy urd due` while a round crawls the URD: the next round takes it again."""
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="ann", url="http://a.test/", depth=0, timing=HOUR))
    rnd = engine.open_due(now_millis() - 10)
    with make_engine.store() as store:
        store.make_due(["u1"], rnd.started_ms + 5)
    crawl(engine, rnd, SITE)
    engine.close_finished()
    with make_engine.store() as store:
        assert store.get("u1").lastcheck == rnd.started_ms
    again = engine.open_due(rnd.started_ms + 6)
    assert again is not None and again.real_urds == ["u1"]


def test_only_ids_crawls_urds_that_are_not_due(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="ann", url="http://a.test/", depth=0, timing=HOUR,
                               lastcheck=now_millis()))
    assert engine.open_due(now_millis()) is None
    rnd = engine.open_due(now_millis(), only_ids=["u1"])
    assert rnd is not None and rnd.real_urds == ["u1"]


def test_the_urd_store_keeps_a_due_asked_after_the_round_opened(tmp_path):
    """Defect (a) of issue 18 at the store: closing a round (mark_checked with the round's
    opening time) overwrote a `scrapy urd due` made while the round ran."""
    with SqliteUrdStore(tmp_path / "urd.sqlite") as store:
        store.put_many([Urd(id="u1", owner="ann", url="http://a.test/", depth=0, timing=HOUR)])
        opened = now_millis()
        store.make_due(["u1"], opened + 5)
        store.mark_checked(["u1"], opened)
        assert [u.id for u in store.due(opened + 5)] == ["u1"]
        assert store.get("u1").lastcheck == opened
        store.make_due(["u1"], opened - 5)  # asked before the round opened: the round served it
        store.mark_checked(["u1"], opened)
        assert store.due(opened + 5) == []


def test_a_round_whose_closing_fails_is_closed_all_the_same(tmp_path):
    """An error while the round closes (the URD-DB unwritable) is raised to the adapter, which
    says it; the engine is ready for the next round rather than stuck in this one."""
    path = tmp_path / "urd.sqlite"
    broken = []

    def store():
        if broken:
            raise OSError("the URD-DB is gone")
        return SqliteUrdStore(path)

    engine = LocalRounds(store)
    with store() as s:
        s.put_many([Urd(id="u1", owner="ann", url="http://a.test/", depth=0, timing=HOUR)])
    rnd = engine.open_due(now_millis())
    crawl(engine, rnd, SITE)
    broken.append(True)
    with pytest.raises(OSError):
        engine.close_finished()
    assert engine.current is None and engine.close_finished() == []
    broken.clear()
    assert engine.open_due(now_millis()) is not None  # not checked: due again


def test_sentinels_pseudo_urds_give_owners_but_no_urd_ids(tmp_path):
    """Issue 17: a page fetched for a sentinel names its owner, not a 'sentinel-...' URD id, and
    the round's URD count leaves the pseudo-URDs out."""
    path = tmp_path / "urd.sqlite"
    engine = LocalRounds(lambda: SqliteUrdStore(path))
    watched = Urd(id="sentinel-0123456789ab", owner="carol", url="http://a.test/", depth=0, timing=HOUR)
    rnd = engine.open([Urd(id="u1", owner="ann", url="http://a.test/", depth=0, timing=HOUR), watched],
                      now_millis())
    items, _ = crawl(engine, rnd, SITE)
    assert items["http://a.test/"]["owners"] == ["ann", "carol"]
    assert items["http://a.test/"]["urd_ids"] == ["u1"]
    assert rnd.real_urds == ["u1"]




class WorkerAfterEachWrite:
    """A shared frontier as the scheduler sees it while a fast worker crawls: after each call
    that queues pages, every page queued is crawled (``crawl``) before the scheduler goes on."""

    def __init__(self, frontier, crawl):
        self.frontier, self.crawl = frontier, crawl

    def __getattr__(self, name):
        return getattr(self.frontier, name)

    def offer(self, *args):
        try:
            return self.frontier.offer(*args)
        finally:
            self.crawl()

    def offer_many(self, *args):
        try:
            return self.frontier.offer_many(*args)
        finally:
            self.crawl()


def test_a_start_page_a_worker_finished_as_the_round_opened_is_followed_for_its_own_urd(
        tmp_path, redis_url, redis_prefix):
    """Found by bench/chaos.py (issue 44): `scrapy urd schedule` queued a round's start pages one
    at a time, the round already open to the workers; a start page reached from another's could
    be fetched and finished before its own URD's offer came, which then merged into a finished
    page: none of that URD's pages were crawled (342 of 400 in one round)."""
    path = tmp_path / "urd.sqlite"

    def store():
        return SqliteUrdStore(path)

    add(store, Urd(id="a-section", owner="ann", url="http://a.test/1", depth=1, timing=HOUR),
        Urd(id="b-home", owner="bob", url="http://a.test/", depth=1, timing=HOUR))
    client = redis.Redis.from_url(redis_url)
    scheduler = RedisRounds(RoundRegistry(client, redis_prefix), store)
    worker = RedisRounds(RoundRegistry(client, redis_prefix))
    opened = []
    real_frontier = scheduler.registry.frontier

    def crawl_queued():
        for round_id in scheduler.registry.open_rounds():
            opened.append(round_id)
            crawl(worker, worker.round(round_id), SITE)

    scheduler.registry.frontier = lambda round_id: WorkerAfterEachWrite(real_frontier(round_id), crawl_queued)
    scheduler.open_due(now_millis())
    crawl_queued()
    nodes = worker.round(opened[0]).frontier
    # each start page links to the other: whichever is offered first, the other is reached from it
    assert nodes.contains("http://a.test/2") and nodes.contains("http://a.test/1/x")


# -- depth, scope and coalescing (were end-to-end crawls; the spider only adapts these) ------

def test_depth_zero_fetches_only_the_urd_page(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="alice", url="http://a.test/", depth=0, timing=HOUR))
    items, fetched = crawl(engine, engine.open_due(now_millis()), {"http://a.test/": ["http://a.test/x"]})
    assert fetched == ["http://a.test/"] and list(items) == ["http://a.test/"]
    assert engine.stats["webrace/ignored/depth"] == 1


def test_depth_limit_follows_links_exactly_n_levels(make_engine):
    chain = {"http://a.test/": ["http://a.test/l1"], "http://a.test/l1": ["http://a.test/l2"],
             "http://a.test/l2": ["http://a.test/l3"]}
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="alice", url="http://a.test/", depth=2, timing=HOUR))
    items, fetched = crawl(engine, engine.open_due(now_millis()), chain)
    assert sorted(fetched) == ["http://a.test/", "http://a.test/l1", "http://a.test/l2"]
    assert {u: i["depth"] for u, i in items.items()} == {"http://a.test/": 0, "http://a.test/l1": 1,
                                                         "http://a.test/l2": 2}
    assert items["http://a.test/l2"]["parent_url"] == "http://a.test/l1"


@pytest.mark.parametrize(("scope", "followed"), [
    ("host", set()),
    ("domain", {"http://news.site.test/s"}),
    ("any", {"http://news.site.test/s", "http://other.test/f"}),
])
def test_scope_decides_which_hosts_a_urd_follows(make_engine, scope, followed):
    site = {"http://www.site.test/": ["http://news.site.test/s", "http://other.test/f"]}
    engine = make_engine()
    add(make_engine.store, Urd(id="u1", owner="alice", url="http://www.site.test/", depth=1, timing=HOUR,
                               scope=scope))
    items, fetched = crawl(engine, engine.open_due(now_millis()), site)
    assert set(fetched) - {"http://www.site.test/"} == followed
    assert engine.stats.get("webrace/ignored/scope", 0) == 2 - len(followed)


def test_the_links_cap_counts_only_links_in_scope_and_depth(make_engine):
    """Issue 41: off-site links first do not use up WEBRACE_MAX_LINKS_PER_PAGE."""
    off_site = [f"http://other{i}.test/" for i in range(5)]
    on_site = [f"http://a.test/p{i}" for i in range(3)]
    engine = make_engine(Limits(max_links=2))
    add(make_engine.store, Urd(id="u1", owner="alice", url="http://a.test/", depth=1, timing=HOUR))
    _, fetched = crawl(engine, engine.open_due(now_millis()), {"http://a.test/": off_site + on_site})
    assert sorted(fetched) == ["http://a.test/", "http://a.test/p0", "http://a.test/p1"]
    counts = {k: v for k, v in engine.stats.items() if v}
    assert counts["webrace/ignored/scope"] == 5 and counts["webrace/ignored/limit"] == 1
    assert counts["webrace/discovered"] == 9 and counts["webrace/followed"] == 3


def test_two_urds_naming_the_same_link_are_one_request(make_engine):
    engine = make_engine()
    add(make_engine.store, Urd(id="a1", owner="alice", url="http://a.test/", depth=0, timing=HOUR),
        Urd(id="b1", owner="bob", url="http://a.test/", depth=0, timing=HOUR))
    items, fetched = crawl(engine, engine.open_due(now_millis()), {})
    assert fetched == ["http://a.test/"]
    assert items["http://a.test/"]["owners"] == ["alice", "bob"] and items["http://a.test/"]["urd_ids"] == ["a1", "b1"]
    assert engine.stats["webrace/coalesced"] == 1


def test_overlapping_subtrees_fetch_each_page_once(make_engine):
    site = {"http://a.test/": ["http://a.test/a", "http://a.test/b"], "http://a.test/a": ["http://a.test/c"],
            "http://a.test/b": ["http://a.test/c"], "http://a.test/c": ["http://a.test/"]}
    engine = make_engine()
    add(make_engine.store, Urd(id="a1", owner="alice", url="http://a.test/a", depth=1, timing=HOUR),
        Urd(id="b1", owner="bob", url="http://a.test/b", depth=1, timing=HOUR),
        Urd(id="c1", owner="carol", url="http://a.test/", depth=3, timing=HOUR))
    items, fetched = crawl(engine, engine.open_due(now_millis()), site)
    assert sorted(fetched) == ["http://a.test/", "http://a.test/a", "http://a.test/b", "http://a.test/c"]
    assert items["http://a.test/c"]["owners"] == ["alice", "bob", "carol"]


def test_next_due_is_the_soonest_urd_and_none_without_urds(tmp_path):
    engine = LocalRounds(lambda: SqliteUrdStore(tmp_path / "urd.sqlite"))
    assert engine.next_due() is None
    with SqliteUrdStore(tmp_path / "urd.sqlite") as store:
        store.put_many([Urd(id="late", owner="a", url="http://a.test/", depth=0, timing=HOUR, lastcheck=5 * HOUR),
                        Urd(id="soon", owner="a", url="http://b.test/", depth=0, timing=HOUR, lastcheck=HOUR)])
    assert engine.next_due() == 2 * HOUR


def test_a_rounds_structures_are_out_of_the_collectors_sight_until_it_closes_then_collectable(tmp_path):
    """Building a round freezes what is alive (full collections stop walking 10,000 URDs
    again and again); closing it unfreezes, so garbage cycles made meanwhile are collected."""
    import gc
    import weakref

    store = lambda: SqliteUrdStore(tmp_path / "urd.sqlite")  # noqa: E731
    add(store, Urd("u1", "alice", "http://a.test/", HOUR, 1))
    engine = LocalRounds(store)

    class Cycle:
        pass

    gc.unfreeze()
    garbage = Cycle()
    garbage.me = garbage  # a cycle: only the collector frees it
    gone = weakref.ref(garbage)
    rnd = engine.open_due(now_millis())
    assert gc.get_freeze_count() > 0 and gc.isenabled()  # paused only while it was built
    del garbage
    gc.collect()
    assert gone() is not None, "frozen while the round is open"
    crawl(engine, rnd, SITE)
    engine.close_finished()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None, "collectable once the round closed"


def test_garbage_cycles_of_a_continuous_crawl_go_with_their_round_though_each_round_freezes_the_collector(tmp_path):
    """A continuous crawl opens a round a second: each opening freezes what is alive, so a
    garbage cycle left by one round (a failure's traceback, a round a callback held) must be
    collected when its round closes, not wait for a full collection that each freeze puts off
    (issue 44: RSS grew 3.4 GB an hour). No gc.collect() here: the engine's own."""
    import gc
    import weakref

    store = lambda: SqliteUrdStore(tmp_path / "urd.sqlite")  # noqa: E731
    add(store, Urd("u1", "alice", "http://a.test/", 1, 1))
    engine = LocalRounds(store)

    class Cycle:
        pass

    gc.unfreeze()
    left = []
    for _ in range(30):
        rnd = engine.open_due(now_millis() + 1000)  # due again: its timing is 1 ms
        garbage = Cycle()
        garbage.me, garbage.round = garbage, rnd  # a cycle holding the round
        left.append(weakref.ref(garbage))
        del garbage, rnd
        crawl(engine, engine.current, SITE)
        engine.close_finished()
    assert gc.get_freeze_count() == 0
    assert [ref for ref in left if ref() is not None] == []


def test_a_worker_holds_no_round_the_scheduler_closed_however_many_it_met(tmp_path, redis_url, redis_prefix):
    """A distributed worker meets a round every few seconds for months: the rounds
    `scrapy urd schedule` closed, and their frontiers' handles, are forgotten, so its memory
    is bounded by the open rounds (issue 44); a round still open, or one whose pages the
    worker still leases, is kept."""
    client = redis.Redis.from_url(redis_url)
    store = lambda: SqliteUrdStore(tmp_path / "urd.sqlite")  # noqa: E731
    add(store, Urd("u1", "alice", "http://a.test/", 1, 1))
    scheduler = RedisRounds(RoundRegistry(client, redis_prefix), store)
    worker = RedisRounds(RoundRegistry(client, redis_prefix))  # no URD-DB: it reads rounds from Redis
    for n in range(10):
        rnd = worker.round(scheduler.open_due(now_millis() + 1000 * n).id)
        assert worker.forget_closed(worker.registry.open_rounds()) == []  # open: kept
        crawl(worker, rnd, SITE)
        scheduler.close_finished()
        assert worker.forget_closed(worker.registry.open_rounds(), busy={rnd.id}) == []  # still leased here
        assert worker.forget_closed(worker.registry.open_rounds()) == [rnd.id]
    assert worker.rounds == {} and worker.registry.frontiers == {}


def test_a_closed_rounds_keys_leave_redis_one_lease_timeout_after_it_closes(tmp_path, redis_url, redis_prefix):
    """A continuous crawl closes a round every few seconds: its keys stay for a worker whose
    lease expired (one lease timeout), not an hour, so Redis holds minutes of closed rounds
    instead of growing for an hour (issue 44)."""
    from scrapy.settings import Settings

    from webrace.backends import open_round_engine

    settings = Settings({"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix, "WEBRACE_LEASE_TIMEOUT": 90,
                         "WEBRACE_DATA_DIR": str(tmp_path)})
    add(lambda: SqliteUrdStore(tmp_path / "urd.sqlite"), Urd("u1", "alice", "http://a.test/", 1, HOUR))
    engine = open_round_engine(settings, worker=False)
    rnd = engine.open_due(now_millis())
    crawl(engine, rnd, SITE)
    assert [r.id for r in engine.close_finished()] == [rnd.id]
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{redis_prefix}round:{rnd.id}:*"))
    assert keys and all(0 < client.ttl(key) <= 90 for key in keys)


def test_a_page_reached_through_redirects_and_links_is_downloaded_once_and_parents_are_items(make_engine):
    # /old -> /new (a link to /new too), /tmp -> /chain -> /new/b, /dir -> /dir/ (linked both ways),
    # /back -> / (a page fetched already): every URL downloaded once, whichever route comes first
    site = {
        "http://a.test/": ["http://a.test/old", "http://a.test/new", "http://a.test/tmp", "http://a.test/dir"],
        "http://a.test/new": ["http://a.test/dir/", "http://a.test/back", "http://a.test/new/b"],
        "http://a.test/new/b": ["http://a.test/old"],
        "http://a.test/dir/": ["http://a.test/dir/p", "http://a.test/tmp"],
        "http://a.test/dir/p": [],
    }
    redirects = {"http://a.test/old": "http://a.test/new", "http://a.test/tmp": "http://a.test/chain",
                 "http://a.test/chain": "http://a.test/new/b", "http://a.test/dir": "http://a.test/dir/",
                 "http://a.test/back": "http://a.test/"}
    engine = make_engine()
    add(make_engine.store, Urd(id="u", owner="ann", url="http://a.test/", depth=4, timing=HOUR),
        Urd(id="v", owner="bob", url="http://a.test/dir", depth=1, timing=HOUR))
    rnd = engine.open_due(now_millis())
    items, fetched = crawl(engine, rnd, site, redirects=redirects)
    assert len(fetched) == len(set(fetched)), sorted(fetched)
    assert set(items) == set(site)
    for item in items.values():
        assert item["parent_url"] is None if item["depth"] == 0 else item["parent_url"] in items, item  # starts
    # bob's start page redirects to /dir/: his owner is on the page it was stored at, and its link
    assert "bob" in items["http://a.test/dir/"]["owners"] and "bob" in items["http://a.test/dir/p"]["owners"]
    assert engine.stats["webrace/duplicate"] >= 1


def test_urds_merged_into_a_done_page_by_a_worker_that_died_are_followed_by_the_next_one(
        tmp_path, redis_url, redis_prefix):
    """Found by bench/chaos.py (issue 44): a worker's offer merged a URD into a page already done
    (its links to be followed from the stored ones) and the worker died, or lost Redis's answer,
    before following them; the page that linked it was fetched again by another worker, whose
    offer then found nothing to merge: that URD's pages under it were never crawled (53 leaves of
    one hub in a closed round)."""
    path = tmp_path / "urd.sqlite"

    def store():
        return SqliteUrdStore(path)

    root, hub1, hub0 = "http://a.test/", "http://a.test/hub1", "http://a.test/hub0"
    leaves = ["http://a.test/leaf1", "http://a.test/leaf2"]
    site = {root: [hub1, hub0], hub1: [hub0], hub0: leaves}
    add(store, Urd(id="alice-site", owner="alice", url=root, depth=2, timing=HOUR),
        Urd(id="bob-hub1", owner="bob", url=hub1, depth=1, timing=HOUR))
    client = redis.Redis.from_url(redis_url)
    scheduler = RedisRounds(RoundRegistry(client, redis_prefix), store)
    round_id = scheduler.open_due(now_millis()).id
    dying, survivor = (RedisRounds(RoundRegistry(client, redis_prefix)) for _ in range(2))
    items: dict = {}

    def lease(worker, url):
        rnd = worker.round(round_id)
        taken = {n.url: n for n in rnd.frontier.lease_many(60_000, 10)}
        assert url in taken, taken
        rnd.frontier.release([u for u in taken if u != url])
        leased = taken[url]
        return rnd, worker.node(round_id, {"link": leased.url, "parent": leased.parent_url, "depth": leased.depth,
                                           "budgets": leased.budgets})[1]

    def fetch(worker, url):
        rnd, node = lease(worker, url)
        node.links = list(site.get(url, []))
        write(worker, worker.fetched(rnd, node, {"url": url, "depth": node.depth, "parent_url": node.parent_url}),
              items)

    fetch(survivor, hub1)  # bob's start page: hub0 offered with bob's depth used up
    fetch(survivor, hub0)  # done, its links followed for nobody
    rnd, node = lease(dying, root)
    real_get = rnd.frontier.get

    def killed_reading(url):  # the worker dies after its offer merged alice into hub0, before following
        if url == hub0:
            raise SystemExit("killed")
        return real_get(url)

    rnd.frontier.get = killed_reading
    node.links = list(site[root])
    with pytest.raises(SystemExit):
        dying.fetched(rnd, node, {"url": root, "depth": 0, "parent_url": None})
    survivor.round(round_id).frontier.expire([root])  # its lease runs out: the root is fetched again
    fetch(survivor, root)
    frontier = survivor.round(round_id).frontier
    assert all(frontier.contains(leaf) for leaf in leaves)
    for leaf in leaves:
        fetch(survivor, leaf)
    write(survivor, survivor.flush(), items)
    assert {leaf: items[leaf]["urd_ids"] for leaf in leaves} == dict.fromkeys(leaves, ["alice-site"])
    assert frontier.pending() == 0
