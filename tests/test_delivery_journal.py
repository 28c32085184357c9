"""The delivery journal (webrace/backends/sqlite/journal.py) and the agent's use of it (issue
44): what the agent delivered stays known in its own data directory, so that nothing is
received twice when the delivery store forgot its marks (Redis came back empty, the channels
were registered again, the crawl made the same ACIs again). A real Redis, a real webhook
receiver on 127.0.0.1 (tests/test_delivery.py's)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
import redis
from scrapy.settings import Settings
from test_delivery import Clock, Hook, aci, add_channel, hook_server, make_settings, note, run_command, store_items

from webrace.backends.sqlite.journal import DeliveryJournal
from webrace.delivery.agent import DeliveryAgent

__all__ = ["hook_server"]  # the receiver fixture, shared with tests/test_delivery.py

DAY_MS = 86_400_000


@pytest.fixture
def hook(hook_server: Hook) -> Hook:
    hook_server.reset()
    return hook_server


@pytest.fixture(params=["embedded", "redis"])
def mode(request, tmp_path: Path):
    """(settings of the mode, a function making its delivery store forget everything: Redis's
    keys of the test's prefix deleted, as a Redis without persistence comes back; the embedded
    store's file removed)."""
    if request.param == "redis":
        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        client = redis.Redis.from_url(url)

        def wipe() -> None:
            keys = list(client.scan_iter(match=f"{prefix}*"))
            assert keys
            client.delete(*keys)

        return make_settings(tmp_path / "data", REDIS_URL=url, WEBRACE_REDIS_PREFIX=prefix), wipe

    settings = make_settings(tmp_path / "data")

    def forget() -> None:
        for name in ("delivery.sqlite", "aci.sqlite", "sentinels.sqlite"):
            for path in (tmp_path / "data").glob(f"{name}*"):
                path.unlink()

    return settings, forget


def deliver_wipe_and_make_again(settings: Settings, wipe, hook: Hook, clock: Clock, gap_ms: int = 60_000):
    """Deliver two ACIs and a notification; the store forgets everything; the channel is added
    again and the crawl makes the same ACIs again (same ids, a later fetch) and the same
    notification; a new agent (the process restarted) runs a pass: its report."""
    acis = [aci("alice", "/a", clock.now), aci("alice", "/b", clock.now + 1)]
    notes = [note("alice", "/watched", clock.now)]
    add_channel(settings, "alice", hook.url())
    store_items(settings, acis, notes)
    first = DeliveryAgent(settings, clock=clock).run_pass()
    assert first.stats["delivery/messages"] == 1 and len(hook.messages()) == 1
    wipe()
    clock.advance(gap_ms / 1000)
    add_channel(settings, "alice", hook.url())  # since 0: everything the store holds is the channel's
    store_items(settings, [replace(a, updatetime=clock.now) for a in acis], notes)
    return DeliveryAgent(settings, clock=clock).run_pass()


def test_nothing_is_received_twice_after_the_store_forgot_what_it_sent(mode, hook):
    settings, wipe = mode
    clock = Clock()
    report = deliver_wipe_and_make_again(settings, wipe, hook, clock)
    assert len(hook.messages()) == 1  # the first message only
    assert report.stats["delivery/messages"] == 0 and report.stats["delivery/already_delivered"] == 3
    assert report.line().endswith(", 3 already delivered, not sent again")
    assert report.stats["delivery/acked"] == 2  # the store knows again: the ACIs are acknowledged
    again = DeliveryAgent(settings, clock=clock).run_pass()
    assert again.stats["delivery/already_delivered"] == 0 and "already delivered" not in again.line()
    store_items(settings, [aci("alice", "/new", clock.now)])
    newer = DeliveryAgent(settings, clock=clock).run_pass()
    assert newer.stats["delivery/messages"] == 1
    (_, last) = hook.messages()
    assert "http://news.test/new" in last and "http://news.test/a" not in last and "/watched" not in last


def test_without_the_journal_the_same_items_are_sent_again(tmp_path, hook, redis_url, redis_prefix):
    """What the journal prevents (and that the test above could fail)."""
    settings = make_settings(tmp_path / "data", REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix,
                             WEBRACE_DELIVERY_JOURNAL_DAYS=0)
    client = redis.Redis.from_url(redis_url)
    report = deliver_wipe_and_make_again(settings, lambda: client.delete(*client.scan_iter(f"{redis_prefix}*")),
                                         hook, Clock())
    assert report.stats["delivery/messages"] == 1 and len(hook.messages()) == 2
    assert not (tmp_path / "data" / "delivery-journal.sqlite").exists()


def test_a_journal_entry_older_than_its_bound_is_forgotten(tmp_path, hook, redis_url, redis_prefix):
    settings = make_settings(tmp_path / "data", REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix,
                             WEBRACE_DELIVERY_JOURNAL_DAYS=2)
    client = redis.Redis.from_url(redis_url)
    report = deliver_wipe_and_make_again(settings, lambda: client.delete(*client.scan_iter(f"{redis_prefix}*")),
                                         hook, Clock(), gap_ms=3 * DAY_MS)
    assert report.stats["delivery/already_delivered"] == 0 and report.stats["delivery/messages"] == 1
    assert len(hook.messages()) == 2


def test_the_journal_is_pruned_by_age_and_by_count(tmp_path):
    with DeliveryJournal(tmp_path / "j.sqlite", max_age_ms=10 * DAY_MS, max_entries=3) as journal:
        journal.record("alice", "json://h/x", [("aci", "old", 1)], now_ms=0)
        assert journal.delivered("alice", "json://h/x", "aci", ["old"], now_ms=10 * DAY_MS) == {"old"}
        assert journal.delivered("alice", "json://h/x", "aci", ["old"], now_ms=10 * DAY_MS + 1) == set()
        journal.record("alice", "json://h/x", [("aci", "a", 1), ("aci", "b", 2)], now_ms=10 * DAY_MS + 1)
        assert len(journal) == 2  # "old" pruned by age as the journal was written
        journal.record("alice", "json://h/x", [("aci", "c", 3), ("notification", "n", 4)], now_ms=10 * DAY_MS + 2)
        assert len(journal) == 3  # the oldest ("a" or "b", written first) went first
        assert journal.delivered("alice", "json://h/x", "aci", ["a", "b", "c"], 10 * DAY_MS + 2) >= {"c"}
        assert journal.delivered("alice", "json://h/x", "notification", ["n"], 10 * DAY_MS + 2) == {"n"}


def test_the_journal_knows_a_channel_by_owner_and_url_and_holds_no_url(tmp_path):
    secret = "json://user:s3cret-token@hooks.example.org/x"
    with DeliveryJournal(tmp_path / "j.sqlite", max_age_ms=DAY_MS, max_entries=100) as journal:
        journal.record("alice", secret, [("aci", "i1", 1)], now_ms=1)
        assert journal.delivered("alice", secret, "aci", ["i1", "i2"], 2) == {"i1"}
        assert journal.delivered("bob", secret, "aci", ["i1"], 2) == set()  # another owner's channel
        assert journal.delivered("alice", secret + "y", "aci", ["i1"], 2) == set()  # another URL
        assert journal.delivered("alice", secret, "notification", ["i1"], 2) == set()
    with DeliveryJournal(tmp_path / "j.sqlite", max_age_ms=DAY_MS, max_entries=100) as reopened:
        assert reopened.delivered("alice", secret, "aci", ["i1"], 2) == {"i1"}  # its key is in the file
        key = reopened.channel_key("alice", secret)
    with DeliveryJournal(tmp_path / "other.sqlite", max_age_ms=DAY_MS, max_entries=100) as other:
        assert other.channel_key("alice", secret) != key  # a key of its own: no hash shared between files
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("j.sqlite*"))
    assert b"s3cret" not in raw and b"hooks.example.org" not in raw


def test_a_corrupt_journal_is_one_warning_and_delivery_goes_on(tmp_path, hook, caplog, capsys):
    settings = make_settings(tmp_path / "data")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "delivery-journal.sqlite").write_bytes(b"this is not a database\n" * 100)
    clock = Clock()
    add_channel(settings, "alice", hook.url())
    agent = DeliveryAgent(settings, clock=clock)
    reports = []
    with caplog.at_level(logging.WARNING, logger="webrace.delivery.agent"):
        for n in range(3):
            store_items(settings, [aci("alice", f"/p{n}", clock.now)])
            reports.append(agent.run_pass())
            clock.advance(1)
    assert [r.stats["delivery/messages"] for r in reports] == [1, 1, 1] and len(hook.messages()) == 3
    warnings = [r.getMessage() for r in caplog.records if "journal" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "file is not a database" in warnings[0] and "delivering without it" in warnings[0]
    assert [len(r.warnings) for r in reports] == [1, 0, 0] and all(r.failure() is None for r in reports)
    store_items(settings, [aci("alice", "/cmd", clock.now)])
    code, out, err = run_command(settings, capsys)  # `scrapy deliver`: said on stderr, exit 0 (delivered)
    assert code == 0 and "1 message(s) sent" in out
    assert [line for line in err.splitlines() if "journal" in line] == [f"warning: {warnings[0]}"]


def test_a_journal_that_cannot_be_written_is_one_warning_and_delivery_goes_on(tmp_path, hook):
    settings = make_settings(tmp_path / "data")
    (tmp_path / "data" / "delivery-journal.sqlite").mkdir(parents=True)  # in the way of the file
    clock = Clock()
    add_channel(settings, "alice", hook.url())
    agent = DeliveryAgent(settings, clock=clock)
    reports = []
    for n in range(2):
        store_items(settings, [aci("alice", f"/p{n}", clock.now)])
        reports.append(agent.run_pass())
    assert [r.stats["delivery/messages"] for r in reports] == [1, 1] and len(hook.messages()) == 2
    assert [len(r.warnings) for r in reports] == [1, 0] and "delivery-journal.sqlite" in reports[0].warnings[0]
