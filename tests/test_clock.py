"""The wall clock stepping under a long-running process (issue 44): the clock watch, the stores'
``reclock`` (both backends), the round engines (embedded and the distributed scheduler) and
delivery's retries. Clocks are injected: no sleeps, no real step."""

from __future__ import annotations

import contextlib

import pytest
from scrapy.settings import Settings
from test_round_engine import SITE, crawl

from webrace.backends import open_round_engine, open_sentinel_store, open_urd_store
from webrace.backends.sqlite import SqliteUrdStore
from webrace.clock import ClockWatch, SteadySeconds, span, steady_reactor, step_line
from webrace.records.sentinel import make
from webrace.rounds.engine import Counts
from webrace.sentinels.due import StoredSentinels
from webrace.urd import Urd

HOUR = 3_600_000
DAY = 24 * HOUR
B = 1_800_000_000_000  # the wall clock before the step (epoch ms)
BACK = B - HOUR + 5000  # five seconds later, after a step back of an hour


class Monotonic:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the watch ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("wall_moved_ms", "monotonic_moved_s", "step"), [
    (5000, 5.0, 0),  # both clocks agree
    (5000 + 59_000, 5.0, 0),  # drift under the threshold (60 s): not a step
    (-HOUR + 5000, 5.0, -HOUR),  # set back an hour
    (2 * HOUR, 0.5, 2 * HOUR - 500),  # set forward two hours
    (0, 600.0, -600_000),  # the wall clock stood still for ten minutes: a step back
])
def test_the_watch_reports_what_the_wall_clock_moved_beyond_the_monotonic_clock(wall_moved_ms, monotonic_moved_s,
                                                                                  step):
    mono = Monotonic()
    watch = ClockWatch(60.0, monotonic=mono)
    assert watch.step(B) == 0  # the first look has nothing to compare with
    mono.now += monotonic_moved_s
    assert watch.step(B + wall_moved_ms) == step


def test_the_watch_reads_its_own_wall_clock_when_given_none():
    mono, wall = Monotonic(), [B]
    watch = ClockWatch(60.0, wall=lambda: wall[0], monotonic=mono)
    watch.step()
    wall[0] = B - HOUR
    assert watch.step() == -HOUR and watch.last_wall_ms == B - HOUR


def test_a_step_is_said_in_one_line_with_its_direction_and_size():
    assert span(HOUR + 2 * 60_000 + 5000) == "1h2m5s" and span(-HOUR) == "1h" and span(400) == "0s"
    line = step_line(-HOUR, "what WebRACE does")
    assert line == "Wall clock stepped back by 1h (against the monotonic clock): what WebRACE does"
    assert "\n" not in line and step_line(90_000, "x").startswith("Wall clock stepped forward by 1m30s")


# -- the stores -----------------------------------------------------------------------------------


def test_the_urd_store_makes_due_only_urds_checked_after_now(tmp_path):
    with SqliteUrdStore(tmp_path / "urd.sqlite") as store:
        store.put_many([Urd(id="future", owner="ann", url="http://a.test/", depth=0, timing=HOUR, lastcheck=B),
                        Urd(id="past", owner="ann", url="http://b.test/", depth=0, timing=DAY, lastcheck=BACK - 1000),
                        Urd(id="never", owner="ann", url="http://c.test/", depth=0, timing=HOUR)])
        assert [u.id for u in store.due(BACK)] == ["never"]
        assert store.reclock(BACK) == 1
        assert [u.id for u in store.due(BACK)] == ["never", "future"]
        assert store.get("past").next_due == BACK - 1000 + DAY  # untouched
        assert store.get("future").lastcheck == B  # the last check is history: only its due time moves
        assert store.reclock(BACK) == 0  # done once




def test_the_sentinel_store_makes_due_only_sentinels_due_beyond_their_interval(sentinel_store):
    hourly = make("ann", "http://a.test/", every_ms=HOUR, tick_ms=1000)
    daily = make("bob", "http://b.test/", every_ms=DAY, tick_ms=1000)
    sentinel_store.add([hourly, daily])
    sentinel_store.checked([hourly.id], B)  # due at B + 1h: 2h from now after the step
    sentinel_store.checked([daily.id], B - 2 * HOUR)  # due at B + 22h: within its day
    assert sentinel_store.due(BACK) == []
    assert sentinel_store.reclock(BACK) == 1
    assert [(s.id, s.asked) for s, _ in sentinel_store.due(BACK)] == [(hourly.id, True)]  # fetched, not served
    assert {s.id: due for s, due, _ in sentinel_store.all()}[daily.id] == B + 22 * HOUR
    assert sentinel_store.reclock(BACK) == 0


# -- the round engines: embedded, and the distributed scheduler ---------------------------------


@pytest.fixture(params=["local", "redis"])
def engine_settings(request, tmp_path):
    settings = {"WEBRACE_DATA_DIR": str(tmp_path / "data"), "WEBRACE_OBJECTS_DIR": str(tmp_path / "objects")}
    if request.param == "redis":
        settings |= {"REDIS_URL": request.getfixturevalue("redis_url"),
                     "WEBRACE_REDIS_PREFIX": request.getfixturevalue("redis_prefix")}
    return Settings(settings)


def clocked_engine(settings, mono):
    engine = open_round_engine(settings, Counts(), StoredSentinels(settings), worker=False)
    engine.clock = ClockWatch(settings.getfloat("WEBRACE_CLOCK_STEP_THRESHOLD", 60.0), monotonic=mono)
    engine.said = []
    engine.say = engine.said.append
    return engine


def add_urds(settings, *urds):
    with open_urd_store(settings) as store:
        store.put_many(urds)


def test_after_a_step_back_urds_and_sentinels_checked_in_the_future_are_due_at_the_next_open(engine_settings):
    add_urds(engine_settings, Urd(id="checked", owner="ann", url="http://a.test/", depth=0, timing=HOUR, lastcheck=B),
             Urd(id="daily", owner="ann", url="http://b.test/", depth=0, timing=DAY, lastcheck=B - 2 * HOUR))
    hourly = make("ann", "http://c.test/", every_ms=HOUR, tick_ms=1000)
    daily = make("bob", "http://d.test/", every_ms=DAY, tick_ms=1000)
    with open_sentinel_store(engine_settings) as store:
        store.add([hourly, daily])
        store.checked([hourly.id], B)
        store.checked([daily.id], B - 2 * HOUR)
    mono = Monotonic()
    engine = clocked_engine(engine_settings, mono)
    assert engine.open_due(B) is None and engine.said == []  # nothing due, nothing "in the future"
    mono.now += 5
    rnd = engine.open_due(BACK)
    assert rnd is not None and rnd.real_urds == ["checked"]
    assert [s.id for group in rnd.sentinels.values() for s, _ in group] == [hourly.id]
    assert engine.said == ['Wall clock stepped back by 1h (against the monotonic clock): 1 URD(s) checked "in the '
                           'future" and 1 sentinel(s) due beyond their interval made due now; the others keep '
                           "their due times"]
    stats = engine.stats
    assert (stats["webrace/clock/stepped_back"], stats["webrace/clock/reclocked_urds"],
            stats["webrace/clock/reclocked_sentinels"]) == (1, 1, 1)


def test_a_step_forward_is_said_and_nothing_is_reclocked(engine_settings):
    add_urds(engine_settings, Urd(id="checked", owner="ann", url="http://a.test/", depth=0, timing=DAY, lastcheck=B))
    mono = Monotonic()
    engine = clocked_engine(engine_settings, mono)
    assert engine.open_due(B) is None
    mono.now += 5
    assert engine.open_due(B + 2 * HOUR + 5000) is None  # a day's timing: still not due
    assert engine.said == ["Wall clock stepped forward by 2h (against the monotonic clock): what fell due meanwhile "
                           "is crawled now, in one round; due times are unchanged"]
    assert engine.stats["webrace/clock/stepped_forward"] == 1
    assert "webrace/clock/reclocked_urds" not in engine.stats
    with open_urd_store(engine_settings) as store:
        assert store.get("checked").next_due == B + DAY


def test_a_step_back_while_the_process_was_down_is_undone_at_its_first_open(engine_settings):
    add_urds(engine_settings, Urd(id="checked", owner="ann", url="http://a.test/", depth=0, timing=HOUR, lastcheck=B))
    engine = clocked_engine(engine_settings, Monotonic())
    rnd = engine.open_due(BACK)
    assert rnd is not None and rnd.real_urds == ["checked"]
    assert engine.said == ['1 URD(s) checked "in the future" and 0 sentinel(s) due beyond their interval made due '
                           "now: the wall clock stepped back since they were checked"]


def test_a_round_open_across_a_step_back_leaves_its_urds_due_at_the_next_open(engine_settings):
    add_urds(engine_settings, Urd(id="u", owner="ann", url="http://a.test/", depth=0, timing=HOUR))
    mono = Monotonic()
    engine = clocked_engine(engine_settings, mono)
    rnd = engine.open_due(B)
    mono.now += 5
    assert engine.open_due(BACK) is None  # the round still crawls u (the scheduler sees the step here)
    crawl(engine, rnd, SITE)
    engine.close_finished()  # u's last check: B, an hour after now
    mono.now += 5
    again = engine.open_due(BACK + 5000)
    assert again is not None and again.real_urds == ["u"]


# -- a crawl's reactor ------------------------------------------------------------------------------


@pytest.mark.parametrize(("steady", "fired"), [(False, []), (True, ["due"])])
def test_a_steady_reactor_runs_its_timed_calls_on_time_across_a_step_back(steady, fired):
    from twisted.internet.selectreactor import SelectReactor

    wall, mono = [B / 1000], Monotonic()
    reactor = SelectReactor()  # not installed: its own timed calls only
    try:
        if steady:
            steady_reactor(reactor, SteadySeconds(lambda: wall[0], mono))
        else:  # Twisted's own: time.time
            reactor.seconds = lambda: wall[0]
        calls = []
        reactor.callLater(10, calls.append, "due")
        wall[0] -= 3600 - 10  # ten seconds later, the wall clock set back an hour
        mono.now += 10
        reactor.runUntilCurrent()
        assert calls == fired
    finally:
        reactor.waker.connectionLost(None)


def test_the_urd_spider_steadies_the_crawls_reactor(tmp_path, monkeypatch):
    from scrapy.utils.test import get_crawler
    from twisted.internet.selectreactor import SelectReactor

    from webrace.spiders import urd

    reactor = SelectReactor()  # stands for the one Scrapy installs (none is installed in this process)
    monkeypatch.setattr(urd, "_reactor", lambda: reactor)
    try:
        spider = urd.UrdSpider.from_crawler(get_crawler(urd.UrdSpider, {"WEBRACE_DATA_DIR": str(tmp_path / "data")}))
        # not while the spider is made: Scrapy installs the reactor after that (TWISTED_REACTOR),
        # and a reactor imported first would be the default one (a crawl under SelectReactor failed)
        assert not isinstance(reactor.seconds, SteadySeconds)
        opened = spider.on_opened(spider)
        with contextlib.suppress(Exception):  # the object cache is not there: steadied before it is asked for
            opened.send(None)
        opened.close()
        assert isinstance(reactor.seconds, SteadySeconds)
    finally:
        reactor.waker.connectionLost(None)
