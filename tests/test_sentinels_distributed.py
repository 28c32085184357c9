"""Sentinels in the distributed mode: one sentinel-store contract held by SQLite and a real
Redis; the baseline moved by compare-and-set (one change, one notification); due sentinels
joining the rounds `scrapy urd schedule` opens; and two real workers on one change."""

from __future__ import annotations

import pytest
import redis
from conftest import Project
from scrapy.settings import Settings

from webrace.backends import open_round_engine, open_sentinel_store
from webrace.backends.redis_sentinels import RedisSentinelStore
from webrace.backends.sqlite import SqliteSentinelStore
from webrace.commands.urd import Command as UrdCommand
from webrace.records.sentinel import make
from webrace.sentinels.baseline import of_version
from webrace.sentinels.diff import notification_diff
from webrace.sentinels.due import StoredSentinels
from webrace.sentinels.evaluate import Notification

URL = "http://a.test/page"
HOUR = 3_600_000


@pytest.fixture
def store(sentinel_store):
    return sentinel_store


def sentinel(owner="alice", url=URL, **options):
    return make(owner, url, every_ms=HOUR, tick_ms=1000, **options)


def note(s, at=1000, text="new", before="", after=""):
    return Notification(s.id, s.owner, s.url, s.type, s.where, {"added": [text]}, "", text, at, 2,
                        before_digest=before, after_digest=after)


# -- the contract: the same assertions on both stores -------------------------------------


def test_added_sentinels_are_due_now_and_listed_by_url_then_id(store):
    a, b = sentinel(url="http://b.test/"), sentinel(owner="bob", url="http://a.test/")
    assert store.add([a, b]) == [a.id, b.id]
    assert [(s.id, due, seen) for s, due, seen in store.all()] == [(b.id, 0, None), (a.id, 0, None)]
    assert [s.id for s, _, _ in store.all("alice")] == [a.id]
    assert [(s.id, seen) for s, seen in store.due(1)] == [(b.id, None), (a.id, None)]


def test_readding_a_sentinel_keeps_its_due_time_and_baseline(store):
    s = sentinel()
    store.add([s])
    store.checked([s.id], 5000, seen="c" * 64)
    store.add([s])
    assert [(due, seen) for _, due, seen in store.all()] == [(5000 + HOUR, "c" * 64)]


def test_remove_returns_the_ids_that_existed_and_forgets_them(store):
    s = sentinel()
    store.add([s])
    store.checked([s.id], 0, seen="c" * 64)
    assert store.remove([s.id, "nope"]) == [s.id]
    assert store.all() == [] and store.all("alice") == [] and store.due(10**13) == []


def test_make_due_and_checked_move_the_next_due_time(store):
    a, b = sentinel(), sentinel(owner="bob")
    store.add([a, b])
    store.checked([a.id, b.id, "gone"], 1000)
    assert store.due(1000) == []
    assert store.make_due([a.id, "nope"], 2000) == [a.id]
    assert [s.id for s, _ in store.due(2000)] == [a.id]
    assert store.make_due(None, 3000) == sorted([a.id, b.id])
    assert {s.id for s, _ in store.due(3000)} == {a.id, b.id}


def test_digests_are_kept_while_a_sentinel_compares_against_them(store):
    s = sentinel()
    store.add([s])
    store.put_digest("c" * 64, b"old")
    store.put_digest("d" * 64, b"loose")
    store.checked([s.id], 0, seen="c" * 64)
    assert store.gc_digests() == 1
    assert store.get_digest("c" * 64) == b"old" and store.get_digest("d" * 64) is None
    store.remove([s.id])
    assert store.gc_digests() == 1 and store.get_digest("c" * 64) is None


def test_notifications_are_kept_once_per_id_newest_first_per_owner(store):
    s, t = sentinel(), sentinel(owner="bob")
    first, second = note(s, at=1000), note(s, at=2000, text="newer")
    assert store.add_notifications([first, second, note(t)]) == 3
    assert store.add_notifications([first]) == 0  # idempotent on the notification's id
    assert [n["id"] for n in store.notifications("alice")] == [second.id, first.id]
    assert [n["id"] for n in store.notifications("alice", since=1500)] == [second.id]
    assert store.notifications("alice")[0] == second.to_dict()


def test_digests_a_notification_shows_its_diff_from_are_kept_by_gc(store):
    s = sentinel()
    store.add([s])
    for sha in ("a", "b", "c"):
        store.put_digest(sha * 64, sha.encode())
    store.checked([s.id], 0, seen="a" * 64)
    assert store.advance({s.id: "a" * 64}, 1000, "b" * 64, b"b", [note(s, before="a" * 64, after="b" * 64)])
    store.checked([s.id], 2000, seen="c" * 64)  # the sentinel moved on; its notification stays
    assert store.gc_digests() == 0
    assert store.get_digest("a" * 64) == b"a" and store.get_digest("b" * 64) == b"b"


def test_advance_moves_a_baseline_only_from_the_expected_one(store):
    s, fresh = sentinel(), sentinel(owner="bob")
    store.add([s, fresh])
    store.checked([s.id], 0, seen="a" * 64)
    moved = store.advance({s.id: "a" * 64, fresh.id: None}, 1000, "b" * 64, b"new", [note(s), note(fresh)])
    assert sorted(moved) == sorted([s.id, fresh.id])
    assert {x.id: (due, seen) for x, due, seen in store.all()} == {s.id: (1000 + HOUR, "b" * 64),
                                                                   fresh.id: (1000 + HOUR, "b" * 64)}
    assert store.get_digest("b" * 64) == b"new"
    assert len(store.notifications("alice")) == 1 and len(store.notifications("bob")) == 1


def test_a_second_evaluation_of_the_same_change_records_nothing(store):
    """A page fetched again (its lease expired) is evaluated again against the baseline the
    round started with: the first evaluation moved it, so the second one loses."""
    s = sentinel()
    store.add([s])
    store.checked([s.id], 0, seen="a" * 64)
    assert store.advance({s.id: "a" * 64}, 1000, "b" * 64, b"new", [note(s, at=1000)]) == [s.id]
    assert store.advance({s.id: "a" * 64}, 1200, "b" * 64, b"new", [note(s, at=1200)]) == []
    assert store.advance({s.id: "a" * 64}, 1300, "e" * 64, b"other", [note(s, at=1300)]) == []
    assert [n["at"] for n in store.notifications("alice")] == [1000]
    assert [seen for _, _, seen in store.all()] == ["b" * 64]
    assert store.get_digest("e" * 64) is None  # a losing evaluation stores no digest


def test_redis_store_keeps_every_key_under_its_prefix(redis_url, redis_prefix):
    client = redis.Redis.from_url(redis_url)
    store = RedisSentinelStore(client, redis_prefix)
    s = sentinel()
    store.add([s])
    store.advance({s.id: None}, 1000, "b" * 64, b"new", [note(s)])
    keys = [k.decode() for k in client.scan_iter(match="*")]
    mine = [k for k in keys if k.startswith(redis_prefix)]
    assert mine and all(not k.startswith("webrace:") for k in keys)


def test_redis_store_handles_batches_larger_than_a_chunk(redis_url, redis_prefix):
    store = RedisSentinelStore(redis.Redis.from_url(redis_url), redis_prefix)
    many = [sentinel(url=f"http://a.test/{i}") for i in range(1203)]
    assert len(store.add(many)) == 1203
    assert len(store.make_due(None, 5)) == 1203
    store.checked([s.id for s in many], 10, seen="c" * 64)
    assert store.due(10 + HOUR - 1) == [] and len(store.due(10 + HOUR)) == 1203
    assert len(store.remove([s.id for s in many])) == 1203


# -- the factory and the rounds `scrapy urd schedule` opens ---------------------------------


def distributed_settings(redis_url, redis_prefix, tmp_path, **extra):
    return Settings({"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
                     "WEBRACE_DATA_DIR": str(tmp_path / "data"),
                     "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects"), **extra})


def test_redis_url_switches_the_sentinel_store_to_redis(redis_url, redis_prefix, tmp_path):
    with open_sentinel_store(distributed_settings(redis_url, redis_prefix, tmp_path)) as s:
        assert isinstance(s, RedisSentinelStore)
    with open_sentinel_store(Settings({"WEBRACE_DATA_DIR": str(tmp_path / "embedded")})) as s:
        assert isinstance(s, SqliteSentinelStore)


def test_due_sentinels_join_the_shared_round_and_workers_see_them(redis_url, redis_prefix, tmp_path):
    settings = distributed_settings(redis_url, redis_prefix, tmp_path)
    s, t = sentinel(), sentinel(owner="bob", type="keyword", pattern="sale")
    with open_sentinel_store(settings) as st:
        st.add([s, t])
        st.checked([t.id], 0, seen="a" * 64)
        st.make_due([t.id], 0)
    scheduler = open_round_engine(settings, sentinels=StoredSentinels(settings), worker=False)
    rnd = scheduler.open_due(1000)
    assert rnd is not None and len(rnd.urds) == 2 and not rnd.real_urds  # one pseudo-URD per owner
    assert scheduler.stats["sentinels/due"] == 2
    worker = open_round_engine(settings, sentinels=StoredSentinels(settings))
    seen = worker.round(rnd.id).sentinels
    assert {x.id: was for x, was in seen[URL]} == {s.id: None, t.id: "a" * 64}
    node = rnd.frontier.lease(60_000)
    assert node.url == URL and rnd.frontier.lease(60_000) is None  # one fetch for both owners
    with open_sentinel_store(settings) as st:  # claimed by the round: not due for another one
        assert st.due(1000) == []
    assert scheduler.open_due(1000 + HOUR) is None  # due again, but its page is still in an open round


def test_only_ids_rounds_take_no_sentinel(redis_url, redis_prefix, tmp_path):
    settings = distributed_settings(redis_url, redis_prefix, tmp_path)
    with open_sentinel_store(settings) as st:
        st.add([sentinel()])
    scheduler = open_round_engine(settings, sentinels=StoredSentinels(settings), worker=False)
    assert scheduler.open_due(1000, only_ids=["nothing"]) is None
    with open_sentinel_store(settings) as st:
        assert len(st.due(1000)) == 1


# -- two real workers, one change -------------------------------------------------------------


def news_page(headline: str) -> str:
    return (f"<html><head><title>News</title></head><body><div id='news'><h1>{headline}</h1></div>"
            "<p>Weather: sunny</p></body></html>")


def test_two_workers_one_change_exactly_one_notification(site, tmp_path, redis_url, redis_prefix, capsys):
    """Four watched pages (one watched by two owners), each changed since the baseline its
    sentinels compare against (the last round's version, taken as `sentinel add` takes it
    from a stored one); `scrapy urd schedule` (its command, in-process) opens the round and
    two `scrapy crawl urd` workers share it: every sentinel gives exactly one notification, in the store and in
    the feeds, whichever worker fetched its page."""
    from test_distributed import finish, start_worker

    env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
           "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects")}
    settings = distributed_settings(redis_url, redis_prefix, tmp_path)
    paths = [f"/s{i}.html" for i in range(4)]
    old = of_version(news_page("Exams on Monday").encode(), "text/html")
    watch = [sentinel(url=site.url(p), where="css:#news") for p in paths]
    watch.append(sentinel(owner="bob", url=site.url(paths[0])))
    with open_sentinel_store(settings) as st:
        st.add(watch)
        st.put_digest(old.sha, old.data)
        st.checked([s.id for s in watch], 0, seen=old.sha)
        st.make_due(None, 0)
    site.delay = 0.2  # one worker alone would not take every page before the other starts
    for i, path in enumerate(paths):
        site.add(path, news_page(f"Exams on Friday {i}"))
    projects = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        projects.append(Project(tmp_path / name))
        projects[-1].env.update(env)
    schedule = UrdCommand()
    schedule.settings = settings
    schedule.schedule(loop=False, interval=1.0)
    assert "opened: 5 URD(s)" in capsys.readouterr().out  # a pseudo-URD per page and owner
    workers = [(p, *start_worker(p, WEBRACE_MAX_LEASED=1)) for p in projects]
    runs = [finish(p, proc, out) for p, proc, out in workers]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    assert sorted(site.paths()) == paths  # each watched page fetched once, for both owners
    with open_sentinel_store(settings) as st:
        notes = st.notifications("alice") + st.notifications("bob")
        assert sorted(n["sentinel"] for n in notes) == sorted(s.id for s in watch)  # one each
        assert all(seen not in (None, old.sha) and due > 0 for _, due, seen in st.all())
        first = next(n for n in notes if n["url"] == site.url(paths[0]) and n["owner"] == "alice")
        assert ("+", "Friday 0") in notification_diff(st, first) and ("-", "Monday") in notification_diff(st, first)
    emitted = [item for r in runs for item in r.items if "sentinel" in item]
    assert sorted(i["id"] for i in emitted) == sorted(n["id"] for n in notes)  # not one per worker


def test_watching_lists_every_sentinel_on_a_url_due_or_not(store):
    a, b, other = sentinel(), sentinel(owner="bob", type="links"), sentinel(url="http://b.test/")
    store.add([a, b, other])
    store.checked([a.id], 1000, seen="c" * 64)  # a is not due now, b is
    assert sorted((s.id, seen) for s, seen in store.watching(URL)) == sorted([(a.id, "c" * 64), (b.id, None)])
    store.remove([b.id])
    assert [s.id for s, _ in store.watching(URL)] == [a.id]
    assert store.watching("http://c.test/") == []


def test_a_sentinel_added_or_made_due_is_asked_until_it_is_checked(store):
    a, b = sentinel(), sentinel(owner="bob")
    store.add([a, b])
    assert all(s.asked for s, _ in store.due(1))  # new: its first check fetches the page
    store.checked([a.id, b.id], 1000)
    store.make_due([a.id], 2000)
    assert [(s.id, s.asked) for s, _ in store.due(2000)] == [(a.id, True)]
    store.advance({a.id: None}, 3000, "d" * 64, b"digest", [])
    store.make_due(None, 10 * HOUR)
    store.checked([b.id], 10 * HOUR)
    assert [(s.id, s.asked) for s, _ in store.due(10 * HOUR + 1)] == [(a.id, True)]
    store.checked([a.id], 10 * HOUR)
    assert not any(s.asked for s, _ in store.due(100 * HOUR))
