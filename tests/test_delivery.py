"""Delivery (webrace/delivery/): ACIs and notifications pushed to each owner's channels through
Apprise, against a real SMTP server (aiosmtpd), a webhook receiver, a channel that accepts and
never answers and a refused port, all on 127.0.0.1. The backoff runs on the tests' own clock;
one `scrapy crawl urd` shows the crawl's extension."""

from __future__ import annotations

import argparse
import email
import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import policy
from email.message import Message as Mail
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from conftest import urd
from cryptography.fernet import Fernet
from scrapy.settings import Settings

from webrace.backends import open_aci_store, open_delivery_store, open_sentinel_store, open_urd_store
from webrace.backends.delivery import RedisDeliveryStore, SqliteDeliveryStore
from webrace.backends.sealing import ChannelCipher
from webrace.clock import ClockWatch
from webrace.commands.deliver import Command
from webrace.delivery.agent import DeliveryAgent
from webrace.delivery.channels import check_url, open_channels
from webrace.delivery.message import compose
from webrace.records.aci import Aci
from webrace.records.channel import Channel, ChannelError, parse_events
from webrace.sentinels.evaluate import Notification
from webrace.urd import now_millis, parse

# -- servers on 127.0.0.1 (module scope: shared, reset by each test) ----------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Mailbox:
    port: int = 0
    mails: list[Mail] = field(default_factory=list)

    def texts(self) -> list[str]:
        return [next(p for p in m.walk() if p.get_content_type() == "text/plain").get_content() for m in self.mails]

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd's name
        self.mails.append(email.message_from_bytes(envelope.original_content, policy=policy.default))
        return "250 OK"


@pytest.fixture(scope="module")
def smtp() -> Iterator[Mailbox]:
    box = Mailbox()
    for _ in range(5):  # aiosmtpd needs a port number: a free one, another if it was taken meanwhile
        box.port = _free_port()
        controller = Controller(box, hostname="127.0.0.1", port=box.port)
        try:
            controller.start()
            break
        except OSError:
            continue
    yield box
    controller.stop()


@dataclass
class Hook:
    """A webhook receiver: records every JSON post (path, body); ``fail[path] = n`` answers the
    next n posts to ``path`` with 500."""

    port: int = 0
    posts: list[tuple[str, dict]] = field(default_factory=list)
    tries: list[str] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)
    got: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/hook") -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    def messages(self, path: str = "/hook") -> list[str]:
        return [body["message"] for p, body in self.posts if p == path]

    def reset(self) -> None:
        with self.lock:
            self.posts.clear(), self.tries.clear(), self.fail.clear()
        self.got.clear()


@pytest.fixture(scope="module")
def hook_server() -> Iterator[Hook]:
    hook = Hook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with hook.lock:
                hook.tries.append(self.path)
                failing = hook.fail.get(self.path, 0) > 0
                if failing:
                    hook.fail[self.path] -= 1
                else:
                    hook.posts.append((self.path, body))
            self.send_response(500 if failing else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            if not failing:
                hook.got.set()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    hook.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield hook
    server.shutdown()
    server.server_close()


@pytest.fixture
def hook(hook_server: Hook) -> Hook:
    hook_server.reset()
    return hook_server


class Dead:
    """Accepts connections and never answers; ``release()`` closes them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.accepted = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()

    def release(self) -> None:
        for conn in self.conns:
            conn.close()
        self.conns.clear()


@pytest.fixture
def dead() -> Iterator[Dead]:
    server = Dead()
    yield server
    server.release()
    server.sock.close()


@pytest.fixture(scope="module")
def refused_url() -> str:
    return f"json://127.0.0.1:{_free_port()}/nobody"


def mail_url(box: Mailbox, to: str = "alice@example.org") -> str:
    return f"mailto://127.0.0.1:{box.port}?from=webrace@example.org&to={to}&mode=insecure"


# -- settings, clock, items ------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = now_millis()

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


def make_settings(data: Path, **values: object) -> Settings:
    settings = Settings()
    settings.setmodule("webrace.settings", priority="project")
    settings.setdict({"WEBRACE_DATA_DIR": str(data), "WEBRACE_DELIVERY_BASE_URL": "http://127.0.0.1:8080",
                      "WEBRACE_DELIVERY_RETRY_BASE": 10, "WEBRACE_DELIVERY_RETRY_MAX": 100,
                      "WEBRACE_DELIVERY_TIMEOUT": 5,
                      "WEBRACE_DELIVERY_ALLOW_HOSTS": "127.0.0.1",  # the test servers (public hosts only, by default)
                      **values}, priority="cmdline")
    return settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "data")


def aci(owner: str, path: str, at: int, urgent: bool = False) -> Aci:
    return Aci(owner=owner, uri=f"http://news.test{path}", relevance=2.0, updatetime=at, filesize=10, version=1,
               docbase=f"sha-{owner}-{path}", summary=f"about {path}", urgent=urgent, title=f"Page {path}")


def note(owner: str, path: str, at: int) -> Notification:
    return Notification(sentinel=f"s-{path}", owner=owner, url=f"http://news.test{path}", type="content", where=None,
                        changes={"added": [f"new text on {path}"], "removed": []}, before="b" * 64, after="a" * 64,
                        at=at)


def store_items(settings: Settings, acis: list[Aci] = (), notes: list[Notification] = ()) -> None:
    with open_aci_store(settings) as store:
        store.add(acis)
    with open_sentinel_store(settings) as store:
        store.add_notifications(notes)


def undelivered(settings: Settings) -> set[str]:
    with open_aci_store(settings) as store:
        return store.undelivered_digests()


def add_channel(settings: Settings, owner: str, url: str, events: str = "aci,notification", since: int = 0) -> str:
    with open_channels(settings) as channels:
        return channels.add(owner, url, events, since)


# -- channels ------------------------------------------------------------------------------


@pytest.mark.parametrize("url, says", [
    ("foo://x", "unknown scheme foo://"),
    ("no scheme at all", "without spaces"),
    ("", "expected one Apprise URL"),
    ("json://" + "a" * 3000, "at most 2048 characters"),
    ("mailto://", "refuses it"),
    ("http://user:s3cret@example.org/x", "unknown scheme http://"),
])
def test_a_channel_url_apprise_cannot_use_is_one_line_without_its_password(url, says):
    with pytest.raises(ChannelError) as raised:
        check_url(url)
    assert says in str(raised.value) and "\n" not in str(raised.value) and "s3cret" not in str(raised.value)


def test_events_are_checked():
    assert parse_events("notification, aci") == ("aci", "notification")
    with pytest.raises(ChannelError, match="expected one or more of aci, notification"):
        parse_events("aci,mail")


def test_channel_list_masks_passwords_and_adding_again_changes_events_not_id(settings):
    url = "json://user:s3cret@127.0.0.1:9/hook"
    first = add_channel(settings, "alice", url)
    assert add_channel(settings, "alice", url, "aci") == first
    with open_channels(settings) as channels:
        (row,) = channels.list("alice")
        assert channels.list("bob") == []
        assert not channels.remove("bob", first)  # another owner's channel stays
    assert row["id"] == first and row["events"] == ["aci"] and row["status"] == "new"
    assert "s3cret" not in json.dumps(row) and "user:****@127.0.0.1:9/hook" in row["shown"]


def run_command(settings: Settings, capsys, *args: str) -> tuple[int, str, str]:
    """``scrapy deliver ARGS`` in this process."""
    command = Command()
    command.settings = settings
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    opts, positional = parser.parse_known_args(list(args))
    command.run(positional, opts)
    out = capsys.readouterr()
    return command.exitcode, out.out, out.err


def test_deliver_channel_commands_add_list_remove_and_refuse_bad_input(settings, capsys):
    code, out, err = run_command(settings, capsys, "channel", "add", "alice", "json://u:s3cret@127.0.0.1:9/x",
                                 "--events", "aci")
    cid = out.strip()
    assert code == 0 and len(cid) == 10
    code, out, err = run_command(settings, capsys, "channel", "add", "alice", "gopher://x")
    assert code == 1 and err.startswith("error: channel URL 'gopher://x': unknown scheme gopher://")
    code, out, err = run_command(settings, capsys, "channel", "list")
    assert cid in out and "u:****@" in out and "s3cret" not in out and "new" in out
    code, out, err = run_command(settings, capsys, "channel", "remove", "bob", cid)
    assert code == 1 and "bob has no channel" in err
    code, out, err = run_command(settings, capsys, "channel", "remove", "alice", cid)
    assert code == 0 and f"Removed channel {cid}" in out


# -- messages ------------------------------------------------------------------------------


def test_a_message_lists_at_most_max_items_and_counts_the_rest():
    acis = [aci("alice", f"/p{i}", 1_000 + i) for i in range(40)]
    notes = [note("alice", f"/n{i}", 2_000 + i).to_dict() for i in range(5)]
    message = compose("alice", acis, notes, "http://127.0.0.1:8080", max_items=10)
    assert message.title == "WebRACE for alice: 40 new pages, 5 changes"
    assert message.body.count("\n- ") == 10 and "... and 35 more: http://127.0.0.1:8080/owner/alice/" in message.body
    assert len(message.items) == 45  # every item is delivered: listed or counted
    assert "/notifications/" in message.body and "http://127.0.0.1:8080/stored/" in message.body


def test_urgent_acis_come_first():
    message = compose("alice", [aci("alice", "/late", 9), aci("alice", "/urgent", 1, urgent=True)], [], max_items=1)
    assert "/urgent" in message.body and "/late" not in message.body and "and 1 more" in message.body


# -- the delivery pass -----------------------------------------------------------------------


def test_each_new_aci_and_notification_arrives_once_per_channel(settings, smtp, hook):
    smtp.mails.clear()
    add_channel(settings, "alice", mail_url(smtp))
    add_channel(settings, "alice", hook.url())
    now = now_millis()
    store_items(settings, [aci("alice", "/a", now), aci("alice", "/b", now + 1), aci("bob", "/bob", now)],
                [note("alice", "/watched", now)])
    agent = DeliveryAgent(settings)
    first = agent.run_pass()
    again = agent.run_pass()  # nothing new: nothing sent
    store_items(settings, [aci("alice", "/c", now + 2)])
    third = agent.run_pass()
    assert first.stats["delivery/messages"] == 2 and again.stats["delivery/messages"] == 0
    assert third.stats["delivery/messages"] == 2
    for texts in (smtp.texts(), hook.messages()):
        assert len(texts) == 2
        for path in ("/a", "/b", "/watched", "/c"):
            assert sum(f"http://news.test{path}" in t for t in texts) == 1, (path, texts)
        assert "/bob" not in "".join(texts)  # bob has no channel: nothing of his goes anywhere
    assert smtp.mails[0]["To"] == "alice@example.org" and "2 new pages, 1 change" in smtp.mails[0]["Subject"]
    assert undelivered(settings) == {"sha-bob-/bob"}  # alice's ACIs acknowledged, bob's not


def test_a_receiver_that_fails_three_times_then_recovers_gets_everything(settings, hook):
    clock = Clock()
    add_channel(settings, "alice", hook.url())
    store_items(settings, [aci("alice", "/a", clock.now)], [note("alice", "/n", clock.now)])
    hook.fail["/hook"] = 3
    agent = DeliveryAgent(settings, clock=clock)
    waits = []
    for attempt in range(3):
        report = agent.run_pass()
        assert report.stats["delivery/failed"] == 1
        assert agent.run_pass().stats["delivery/deferred"] == 1  # waiting out its backoff: no request
        (channel,) = open_delivery_store(settings).channels()
        waits.append((channel.next_try - clock.now) // 1000)
        store_items(settings, [aci("alice", f"/during-{attempt}", clock.now)])  # more arrives meanwhile
        clock.advance(waits[-1])
    assert waits == [10, 20, 40]  # exponential backoff from WEBRACE_DELIVERY_RETRY_BASE
    assert agent.run_pass().stats["delivery/messages"] == 1
    assert hook.tries == ["/hook"] * 4
    (message,) = hook.messages()
    for path in ("/a", "/n", "/during-0", "/during-1", "/during-2"):
        assert f"http://news.test{path}" in message
    assert undelivered(settings) == set()
    with open_channels(settings) as channels:
        assert channels.list()[0]["status"] == "ok"


def test_a_retry_set_before_the_clock_stepped_back_waits_no_longer_than_its_backoff(settings, hook, caplog):
    clock, monotonic = Clock(), [0.0]
    add_channel(settings, "alice", hook.url())
    store_items(settings, [aci("alice", "/a", clock.now)])
    hook.fail["/hook"] = 1
    agent = DeliveryAgent(settings, clock=clock)
    agent.watch = ClockWatch(60.0, monotonic=lambda: monotonic[0])
    assert agent.run_pass().stats["delivery/failed"] == 1  # next try in 10 s
    report = agent.run_pass()
    assert (report.stats["delivery/deferred"], report.stats["delivery/retry_reclocked"]) == (1, 0)
    clock.advance(1 - 3600)  # a second later, the wall clock set back an hour
    monotonic[0] += 1
    with caplog.at_level(logging.WARNING, logger="webrace.delivery.agent"):
        report = agent.run_pass()
    assert (report.stats["delivery/retry_reclocked"], report.stats["delivery/messages"]) == (1, 1)
    assert [r.getMessage() for r in caplog.records if "Wall clock" in r.getMessage()] == [
        "Wall clock stepped back by 1h (against the monotonic clock): a retry due later than its channel's "
        "backoff is tried now"]
    assert hook.tries == ["/hook"] * 2


def test_a_channel_failing_k_times_is_reported_and_never_blocks_the_others(settings, hook, refused_url, capsys):
    clock = Clock()
    clock.now -= 2_000_000  # the third pass at the real time: `scrapy deliver` below reads the real clock
    add_channel(settings, "alice", refused_url)
    add_channel(settings, "alice", hook.url())
    store_items(settings, [aci("alice", "/a", clock.now)])
    agent = DeliveryAgent(settings, clock=clock)
    reports = []
    for _ in range(3):
        reports.append(agent.run_pass())
        clock.advance(1000)
    assert [r.stats["delivery/channels_failing"] for r in reports] == [0, 0, 1]
    assert reports[0].stats["delivery/messages"] == 1 and len(hook.messages()) == 1
    assert "is failing since" in reports[2].failing[0] and "Connection error" in reports[2].failing[0]
    assert undelivered(settings) == {"sha-alice-/a"}  # one ACI channel has not taken it
    code, out, err = run_command(settings, capsys, "channel", "list", "--owner", "alice")
    assert "failing since" in out and "(3 failures in a row)" in out and "Connection" not in out  # the owner's view
    code, out, err = run_command(settings, capsys, "channel", "list", "--owner", "alice", "--errors")
    assert "(3 failures in a row), last error: A Connection error" in out  # the admin's
    code, out, err = run_command(settings, capsys)  # `scrapy deliver`: the channel waits out its backoff
    assert "0 message(s) sent" in out and "1 channel(s) waiting to retry" in out
    assert "warning: Delivery channel" in err and "is failing since" in err


def test_a_delivery_pass_that_failed_to_send_exits_1(settings, hook, refused_url, capsys):
    """Issue 44: `scrapy deliver` printed "1 failed" and exited 0."""
    add_channel(settings, "alice", hook.url())
    store_items(settings, [aci("alice", "/a", now_millis())])
    code, out, err = run_command(settings, capsys)
    assert code == 0 and "1 message(s) sent" in out and "0 failed" in out
    add_channel(settings, "bob", refused_url)
    store_items(settings, [aci("bob", "/b", now_millis())])
    code, out, err = run_command(settings, capsys)
    assert code == 1 and "0 message(s) sent" in out and "1 failed" in out
    assert err.strip().splitlines()[-1] == \
        "error: 1 message(s) could not be delivered (their channels retry with backoff)"
    code, out, err = run_command(settings, capsys)  # bob's channel waits out its backoff: nothing failed now
    assert code == 0 and "1 channel(s) waiting to retry" in out


def test_a_dead_channel_delays_no_other_channel(tmp_path, hook, dead):
    settings = make_settings(tmp_path / "data", WEBRACE_DELIVERY_TIMEOUT=60)  # the test ends the dead send
    add_channel(settings, "alice", f"json://127.0.0.1:{dead.port}/never", "aci")
    add_channel(settings, "alice", hook.url(), "aci")
    store_items(settings, [aci("alice", "/a", now_millis())])
    reports = []
    pass_thread = threading.Thread(target=lambda: reports.append(DeliveryAgent(settings).run_pass()))
    pass_thread.start()
    assert hook.got.wait(30) and dead.accepted.wait(30)
    # the good channel has its message while the dead one still holds its send
    assert len(hook.messages()) == 1 and pass_thread.is_alive()
    dead.release()
    pass_thread.join(30)
    assert reports[0].stats["delivery/messages"] == 1 and reports[0].stats["delivery/failed"] == 1


def test_a_channel_that_never_answers_fails_at_the_send_timeout(tmp_path, dead):
    settings = make_settings(tmp_path / "data", WEBRACE_DELIVERY_TIMEOUT=0.5)
    add_channel(settings, "alice", f"json://127.0.0.1:{dead.port}/never")
    store_items(settings, [aci("alice", "/a", now_millis())])
    report = DeliveryAgent(settings).run_pass()
    # the pass is over while the server still holds the connection open: the sender gave up
    assert report.stats["delivery/failed"] == 1 and dead.accepted.is_set()
    (channel,) = open_delivery_store(settings).channels()
    assert channel.attempts == 1 and channel.last_error


def test_acis_are_acknowledged_when_every_aci_channel_took_them(settings, hook):
    clock = Clock()
    add_channel(settings, "alice", hook.url("/a"), "aci")
    add_channel(settings, "alice", hook.url("/b"), "aci")
    add_channel(settings, "alice", hook.url("/notes"), "notification")  # takes no ACI: does not hold them
    store_items(settings, [aci("alice", "/x", clock.now), aci("bob", "/y", clock.now)])
    hook.fail["/b"] = 1
    agent = DeliveryAgent(settings, clock=clock)
    assert agent.run_pass().stats["delivery/acked"] == 0
    assert undelivered(settings) == {"sha-alice-/x", "sha-bob-/y"}  # `store gc` still keeps both versions
    clock.advance(10)
    assert agent.run_pass().stats["delivery/acked"] == 1
    assert undelivered(settings) == {"sha-bob-/y"}  # bob has no channel: never acknowledged
    assert len(hook.messages("/a")) == 1 and len(hook.messages("/b")) == 1 and hook.messages("/notes") == []


# -- the delivery store, over both backends ---------------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    cipher = ChannelCipher(Fernet.generate_key())
    if request.param == "sqlite":
        s = SqliteDeliveryStore(tmp_path / "delivery.sqlite", cipher)
    else:
        import redis

        s = RedisDeliveryStore(redis.Redis.from_url(request.getfixturevalue("redis_url")), cipher,
                               request.getfixturevalue("redis_prefix"))
    yield s
    s.close()


def test_delivery_store_contract(store):
    channel = Channel("c1", "alice", "json://h/x", ("aci",), since=100)
    assert store.put_channel(channel) and not store.put_channel(Channel("c1", "alice", "json://h/x",
                                                                        ("aci", "notification"), 999))
    assert store.claim("c1", "one", 60_000) and not store.claim("c1", "two", 60_000)
    assert store.claim("c1", "one", 60_000)  # its holder renews it
    store.release("c1", "two")  # not its lease: nothing happens
    assert not store.claim("c1", "two", 60_000)
    store.release("c1", "one")
    assert store.claim("c1", "two", 60_000)
    assert store.failed("c1", 500, "boom", 900) == 1 and store.failed("c1", 600, "bang", 1000) == 2
    (c,) = store.channels("alice")
    assert (c.events, c.since, c.attempts, c.next_try, c.last_error, c.failing_since) == (
        ("aci", "notification"), 100, 2, 1000, "bang", 500)
    store.remember("c1", [("aci", "w", 300)])  # known sent without a send: the failures stay
    assert store.unsent("c1", "aci", ["w", "v"]) == ["v"] and store.channels()[0].attempts == 2
    store.delivered("c1", [("aci", "x", 150), ("aci", "y", 250)], 700, since=200)
    assert store.unsent("c1", "aci", ["x", "y", "z"]) == ["x", "z"]  # x is below since: forgotten
    (c,) = store.channels()
    assert (c.attempts, c.next_try, c.last_error, c.failing_since, c.last_sent, c.since) == (0, 0, "", None, 700, 200)
    assert not store.remove_channel("bob", "c1") and store.remove_channel("alice", "c1") and store.channels() == []


def test_two_delivery_loops_at_once_send_each_item_once_per_channel(tmp_path, hook, redis_url, redis_prefix):
    settings = make_settings(tmp_path / "data", REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix)
    add_channel(settings, "alice", hook.url("/one"))
    add_channel(settings, "alice", hook.url("/two"))
    now = now_millis()
    store_items(settings, [aci("alice", f"/p{i}", now + i) for i in range(5)], [note("alice", "/n", now)])
    agents = [DeliveryAgent(settings), DeliveryAgent(settings)]
    reports = []
    loops = [threading.Thread(target=lambda a=a: reports.append(a.run_pass())) for a in agents]
    for loop in loops:
        loop.start()
    for loop in loops:
        loop.join(30)
    assert sum(r.stats["delivery/messages"] for r in reports) == 2
    for path in ("/one", "/two"):
        texts = hook.messages(path)
        assert len(texts) == 1 and all(f"http://news.test/p{i}" in texts[0] for i in range(5))
    assert undelivered(settings) == set()


# -- the crawl's extension -------------------------------------------------------------------


def test_the_crawl_delivers_after_its_round_and_a_dead_channel_does_not_stop_it(site, project, hook, dead):
    site.html("/", ["/a", "/b"], "coffee news")
    site.html("/a", text="coffee beans")
    site.html("/b", text="tea only")
    settings = make_settings(project.data)
    with open_urd_store(settings) as urds:  # what `scrapy urd add` does, without its process
        urds.put_many(parse(urd("u1", "alice", site.url("/"), depth=1, keywords={"coffee": 1}).encode()))
    for url in (hook.url(), f"json://127.0.0.1:{dead.port}/never"):
        add_channel(settings, "alice", url)
    run = project.crawl(WEBRACE_DELIVERY_TIMEOUT=2, WEBRACE_DELIVERY_BASE_URL="http://127.0.0.1:8080",
                        WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(run.pages) == 3 and len(run.acis) == 2
    (message,) = hook.messages()
    for a in run.acis:
        assert f"http://127.0.0.1:8080/stored/{a['id']}" in message
    log = run.stderr
    assert log.index("Round ") < log.index("done") < log.index("Delivery: 1 message(s) sent") < log.index("1 failed")
    assert "'delivery/messages': 1" in log and "'delivery/failed': 1" in log  # the crawl's stats


def test_a_last_pass_stuck_in_its_store_does_not_hold_the_crawl_open() -> None:
    """The crawl waits for its last pass at most CLOSE_WAIT send timeouts (plus CLOSE_GRACE),
    then ends without it, counting it; the pass runs in a daemon thread, so nothing joins it."""
    from scrapy.utils.test import get_crawler
    from twisted.internet import defer, task

    from webrace.delivery.extension import CLOSE_GRACE, CLOSE_WAIT, DeliveryExtension

    release = threading.Event()
    entered = threading.Event()

    class StuckAgent:  # a pass that never returns until released (a store that stopped answering)
        config = argparse.Namespace(timeout=2.0)

        def run_pass(self) -> None:
            entered.set()
            release.wait(60)

    crawler = get_crawler(settings_dict={"WEBRACE_DELIVERY_INTERVAL": 0})
    extension = DeliveryExtension(crawler, StuckAgent())
    extension.clock = task.Clock()
    try:
        closing = defer.ensureDeferred(extension.spider_closed(spider=None, reason="finished"))
        assert entered.wait(10) and not closing.called
        extension.clock.advance(CLOSE_WAIT * 2.0 + CLOSE_GRACE - 0.5)
        assert not closing.called
        extension.clock.advance(1.0)
        assert closing.called and crawler.stats.get_value("delivery/abandoned") == 1
    finally:
        release.set()
