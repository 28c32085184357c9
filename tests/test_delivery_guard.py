"""Issue 42, delivery: what an owner's channel may reach and do, and what its owner is shown.

- the admin's allow-list of schemes, checked when a channel is added and before each send;
- no method, headers, query or payload fields set by the owner, unless the admin allows it;
- every connection a send makes checked after the name is resolved, against non-public
  addresses in every form (integer, IPv6, mapped, embedded), with the resolver the
  connection uses (a name that answers a public address when the channel is added and
  127.0.0.1 when it is sent reaches nothing), unless the admin allows the host;
- no remote error detail in the owner's view of a channel;
- channel URLs encrypted at rest (SQLite and Redis), plain rows of an older data directory
  read and rewritten.

Servers are real and on loopback (HTTP on 127.0.0.1 and ::1, SMTP with aiosmtpd); every
"nothing reaches" assertion is about a server that is listening and records every request.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scrapy.settings import Settings
from test_delivery import (
    Clock,
    aci,
    mail_url,
    make_settings,
    run_command,
    smtp,  # noqa: F401 - the SMTP server fixture (aiosmtpd), shared
    store_items,
)

from webrace.backends import open_delivery_store
from webrace.backends.sealing import KEY_FILE
from webrace.delivery import guard
from webrace.delivery.agent import DeliveryAgent
from webrace.delivery.channels import UNREADABLE, Channels, check_url, open_channels
from webrace.delivery.guard import REFUSED, AllowList, Guard, parse_address, public
from webrace.delivery.policy import ChannelPolicy
from webrace.delivery.send import instantiate, send
from webrace.records.channel import EVENTS, Channel, ChannelError, channel_id
from webrace.urd import now_millis

PUBLIC = "93.184.215.14"  # answered by the tests' resolver; never connected to


# -- servers that record every request ---------------------------------------------------


@dataclass
class Recorder:
    """An HTTP server that records every request (method, path, headers) and answers
    ``status`` (a redirect to ``location`` when set)."""

    port: int = 0
    status: int = 200
    location: str = ""
    requests: list[tuple[str, str, dict]] = field(default_factory=list)

    def url(self, scheme: str = "json", host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"{scheme}://{host}:{self.port}{path}"


def _serve(recorder: Recorder, family: socket.AddressFamily, host: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def handle_one_request(self) -> None:
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline or not self.parse_request():
                return
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            recorder.requests.append((self.command, self.path, dict(self.headers)))
            self.send_response(recorder.status)
            if recorder.location:
                self.send_header("Location", recorder.location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    server = server_class((host, 0), Handler)
    recorder.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    server = _serve(recorder, socket.AF_INET, "127.0.0.1")
    yield recorder
    server.shutdown()
    server.server_close()


@pytest.fixture
def recorder6() -> Iterator[Recorder]:
    recorder = Recorder()
    server = _serve(recorder, socket.AF_INET6, "::1")
    yield recorder
    server.shutdown()
    server.server_close()


class Resolver:
    """``getaddrinfo`` for tests: the names in ``answers`` get their successive answers (the
    last one repeated); any other host must be an address (never a DNS query)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002 - getaddrinfo's names
        name = host.decode() if isinstance(host, bytes) else host
        self.asked.append(name)
        if name not in self.answers:
            return guard._getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        turns = self.answers[name]
        addresses = turns.pop(0) if len(turns) > 1 else turns[0]
        port = int(port or 0)
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0)) if ":" in a
                else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]


def settings_for(tmp_path: Path, **values: object) -> Settings:
    """The delivery tests' settings, but public hosts only unless ``values`` say otherwise."""
    return make_settings(tmp_path / "data", **{"WEBRACE_DELIVERY_ALLOW_HOSTS": "", **values})


def stored(settings: Settings, url: str, owner: str = "alice") -> str:
    """A channel as a store holds it, whatever the checks made when channels are added (one
    added before them, or under settings since narrowed)."""
    cid = channel_id(owner, url)
    with open_delivery_store(settings) as store:
        store.put_channel(Channel(cid, owner, url, EVENTS, 0))
    return cid


def one_pass(settings: Settings, resolver: Resolver | None = None) -> tuple[dict, Channel]:
    """An ACI of alice's delivered in one pass, when the channel is due (a failed one waits
    out its backoff); the pass's counters and the channel after it."""
    store_items(settings, [aci("alice", f"/{now_millis()}", now_millis())])
    with open_delivery_store(settings) as store:
        due = max([now_millis()] + [c.next_try for c in store.channels()])
    policy = ChannelPolicy.from_settings(settings, resolver)
    report = DeliveryAgent(settings, clock=lambda: due, policy=policy).run_pass()
    with open_delivery_store(settings) as store:
        (channel,) = store.channels()
    return report.stats, channel


# -- which addresses are public ----------------------------------------------------------


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255", "192.0.2.1",
    "198.18.0.1", "::1", "::", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "fec0::1", "ff02::1",
    "ff0e::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a00:1::", "2001:db8::1",
    "100::1", "2001::1",
])
def test_non_public_addresses_in_every_form_are_refused(address):
    assert not public(address)
    assert not Guard().allows("any.example", address)


@pytest.mark.parametrize("address", [PUBLIC, "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8",
                                     "64:ff9b::808:808"])
def test_public_addresses_pass(address):
    assert public(address)


@pytest.mark.parametrize("text, address", [
    ("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("017700000001", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"), ("[::1]", "::1"), ("fe80::1%eth0", "fe80::1"), ("169.254.169.254", "169.254.169.254"),
])
def test_an_address_in_any_form_getaddrinfo_reads_is_read_as_that_address(text, address):
    assert str(parse_address(text)) == address
    if not text.startswith("["):  # getaddrinfo, without DNS, agrees: the guard checks what it answers
        answer = guard._getaddrinfo(text.split("%")[0], 80, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
        assert {a[4][0] for a in answer} == {address}


@pytest.mark.parametrize("name", ["hooks.example.com", "cafe", "mail", "", "deadbeef.example"])
def test_a_name_is_not_an_address(name):
    assert parse_address(name) is None


def test_the_allow_list_takes_names_addresses_and_networks_and_refuses_a_bad_network():
    allow = AllowList.parse("Mail.Internal., 10.0.0.5, 192.168.0.0/24, fd00::/8")
    assert allow.names == {"mail.internal"}
    checker = Guard(allow)
    assert checker.allows("mail.internal", "10.9.9.9") and checker.allows("other", "10.0.0.5")
    assert checker.allows("other", "192.168.0.77") and checker.allows("other", "::ffff:192.168.0.77")
    assert checker.allows("other", "fd00::5") and not checker.allows("other", "10.0.0.6")
    with pytest.raises(ChannelError, match=r"WEBRACE_DELIVERY_ALLOW_HOSTS: '10.0.0.0/33' is not a network"):
        ChannelPolicy.from_settings(Settings({"WEBRACE_DELIVERY_ALLOW_HOSTS": "10.0.0.0/33"}))


# -- connections checked at connect time -------------------------------------------------


@pytest.mark.parametrize("form", ["127.0.0.1", "2130706433", "localhost"])
def test_a_webhook_to_loopback_in_any_form_reaches_nothing_unless_the_admin_allows_it(tmp_path, recorder, form):
    url = recorder.url(host=form)
    settings = settings_for(tmp_path)
    with pytest.raises(ChannelError, match="not a public address"):
        check_url(url, ChannelPolicy.from_settings(settings))
    stored(settings, url)
    stats, channel = one_pass(settings)
    assert recorder.requests == [] and stats["delivery/failed"] == 1 and stats["delivery/refused"] == 1
    said = {"127.0.0.1": "127.0.0.1 is", "2130706433": "2130706433 is 127.0.0.1,",
            "localhost": "localhost resolves to 127.0.0.1,"}[form]
    assert channel.last_error.startswith(f"{REFUSED}{said} not a public address")
    allowed = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1")
    check_url(url, ChannelPolicy.from_settings(allowed))
    stats, _ = one_pass(allowed)
    assert stats["delivery/messages"] == 1 and [r[0] for r in recorder.requests] == ["POST"]


def test_a_webhook_to_ipv6_loopback_reaches_nothing_unless_the_admin_allows_it(tmp_path, recorder6):
    url = recorder6.url(host="[::1]")
    settings = settings_for(tmp_path)
    stored(settings, url)
    stats, channel = one_pass(settings)
    assert recorder6.requests == [] and stats["delivery/refused"] == 1 and "::1" in channel.last_error
    stats, _ = one_pass(settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="::1"))
    assert stats["delivery/messages"] == 1 and len(recorder6.requests) == 1


def test_an_ipv4_mapped_answer_is_checked_as_the_ipv4_address(tmp_path, recorder):
    """Apprise refuses ``[::ffff:127.0.0.1]`` in a URL; a name can still answer it."""
    assert instantiate(recorder.url(host="[::ffff:127.0.0.1]")) is None
    resolver = Resolver({"mapped.example": [["::ffff:127.0.0.1"]]})
    url = recorder.url(host="mapped.example")
    settings = settings_for(tmp_path)
    stored(settings, url)
    stats, channel = one_pass(settings, resolver)
    assert recorder.requests == [] and "::ffff:127.0.0.1" in channel.last_error
    stats, _ = one_pass(settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.0/8"), resolver)
    assert stats["delivery/messages"] == 1 and len(recorder.requests) == 1  # mapped to 127.0.0.1: allowed


def test_the_metadata_address_is_refused_before_any_connection(tmp_path):
    settings = settings_for(tmp_path)
    with pytest.raises(ChannelError, match="169.254.169.254 is not a public address"):
        check_url("json://169.254.169.254/latest/meta-data/", ChannelPolicy.from_settings(settings))
    stored(settings, "json://169.254.169.254/latest/meta-data/")
    stats, channel = one_pass(settings)
    assert channel.last_error.startswith(f"{REFUSED}169.254.169.254 is not a public address")


def test_mail_to_a_loopback_relay_arrives_only_when_the_admin_allows_it(tmp_path, smtp):  # noqa: F811
    smtp.mails.clear()
    url = mail_url(smtp)
    settings = settings_for(tmp_path)
    with pytest.raises(ChannelError, match="127.0.0.1 is not a public address"):
        check_url(url, ChannelPolicy.from_settings(settings))
    stored(settings, url)
    stats, channel = one_pass(settings)
    assert smtp.mails == [] and stats["delivery/refused"] == 1 and channel.last_error.startswith(REFUSED)
    stats, _ = one_pass(settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1"))
    assert stats["delivery/messages"] == 1 and len(smtp.mails) == 1
    with pytest.raises(ChannelError, match="10.0.0.1 is not a public address"):  # the smtp named by ?smtp=
        check_url(f"mailto://alice:pw@{PUBLIC}?smtp=10.0.0.1&to=alice@example.org",
                  ChannelPolicy.from_settings(settings))


def test_a_name_rebound_to_loopback_after_the_channel_was_added_reaches_nothing(tmp_path, recorder):
    """DNS rebinding: hooks.example.com answers a public address when the channel is added,
    127.0.0.1 when it is sent. The send's own lookup is the one checked."""
    resolver = Resolver({"hooks.example.com": [[PUBLIC], ["127.0.0.1"]]})
    settings = settings_for(tmp_path)
    url = recorder.url(host="hooks.example.com")
    with open_channels(settings, resolver) as channels:
        channels.add("alice", url, since=0)  # the add-time check saw a public address
    stats, channel = one_pass(settings, resolver)
    assert resolver.asked == ["hooks.example.com", "hooks.example.com"]
    assert recorder.requests == [] and stats["delivery/refused"] == 1
    assert "hooks.example.com resolves to 127.0.0.1, not a public address" in channel.last_error
    # the same send, the admin allowing the name: it goes where the send's lookup said
    stats, _ = one_pass(settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="hooks.example.com"), resolver)
    assert stats["delivery/messages"] == 1 and recorder.requests[0][2]["Host"] == f"hooks.example.com:{recorder.port}"


def test_a_name_answering_only_non_public_addresses_is_refused_when_added(tmp_path):
    resolver = Resolver({"inside.example": [["10.0.0.7", "fd00::7"]], "mixed.example": [["10.0.0.7", PUBLIC]]})
    policy = ChannelPolicy.from_settings(settings_for(tmp_path), resolver)
    with pytest.raises(ChannelError, match="inside.example resolves to 10.0.0.7, not a public address"):
        check_url("jsons://inside.example/hook", policy)
    assert check_url("jsons://mixed.example/hook", policy)  # a send connects to the public one only
    assert check_url("jsons://does-not-resolve.example/hook", policy)  # left to the send


def test_a_redirect_to_a_loopback_address_is_refused(tmp_path, recorder):
    """The first hop is allowed (by name); the redirect's target is an address the admin did
    not allow: its connection is checked like any other."""
    inner = Recorder()
    server = _serve(inner, socket.AF_INET, "127.0.0.1")
    try:
        recorder.status, recorder.location = 307, inner.url(scheme="http")
        resolver = Resolver({"hooks.test": [["127.0.0.1"]]})
        settings = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="hooks.test")
        stored(settings, recorder.url(host="hooks.test"))
        stats, channel = one_pass(settings, resolver)
    finally:
        server.shutdown()
        server.server_close()
    assert len(recorder.requests) == 1 and inner.requests == []
    assert stats["delivery/refused"] == 1 and "127.0.0.1 is not a public address" in channel.last_error


def test_a_lookup_from_apprise_outside_a_guarded_send_gets_the_strict_guard(recorder):
    """Fail closed: Apprise's code resolving a name in a thread that did not copy the send's
    context (a future Apprise's own pool) is refused non-public addresses all the same."""
    guard.install()
    plugin = instantiate(recorder.url())
    results = []
    worker = threading.Thread(target=lambda: results.append(plugin.notify(body="hello", title="t")))
    worker.start()
    worker.join(30)
    assert results == [False] and recorder.requests == []


def test_lookups_outside_a_send_are_untouched(recorder):
    guard.install()
    assert socket.getaddrinfo("127.0.0.1", recorder.port, 0, socket.SOCK_STREAM)[0][4] == ("127.0.0.1", recorder.port)
    with socket.create_connection(("127.0.0.1", recorder.port), timeout=10):
        pass


def test_the_guard_goes_into_apprises_worker_thread(recorder):
    """A send with a time limit runs in Apprise's pool: the allow-list of this send applies
    there (a strict guard would refuse), and its refusals are reported to the send."""
    allowed = Guard(AllowList.parse("127.0.0.1"))
    assert send(recorder.url(), "t", "hello", 5, allowed) is None and len(recorder.requests) == 1
    error = send(recorder.url(), "t", "hello", 5, Guard())
    assert error.startswith(f"{REFUSED}127.0.0.1 is not a public address") and len(recorder.requests) == 1


# -- schemes and custom requests: the admin's ----------------------------------------------


def test_a_scheme_the_admin_does_not_allow_is_refused_when_added_and_when_sent(tmp_path, recorder):
    settings = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1")
    with pytest.raises(ChannelError) as refused:
        check_url("ntfy://ntfy.sh/alice-topic", ChannelPolicy.from_settings(settings))
    assert "scheme ntfy:// is not allowed here" in str(refused.value) and "\n" not in str(refused.value)
    with_ntfy = settings_for(tmp_path, WEBRACE_DELIVERY_SCHEMES="json,ntfy")
    assert check_url("ntfy://ntfy.sh/alice-topic", ChannelPolicy.from_settings(with_ntfy))
    stored(settings, recorder.url())
    narrowed = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1", WEBRACE_DELIVERY_SCHEMES="mailto")
    stats, channel = one_pass(narrowed)  # the admin narrowed the schemes after the channel was added
    assert recorder.requests == [] and stats["delivery/refused"] == 1
    assert channel.last_error == f"{REFUSED}scheme json:// is not allowed (WEBRACE_DELIVERY_SCHEMES: mailto://)"


@pytest.mark.parametrize("query, named", [
    ("method=DELETE", "method=DELETE"), ("+X-Custom=evil", "+X-Custom"), ("%2BX-Custom=evil", "+X-Custom"),
    ("-token=evil", "-token"), (":message=evil", ":message"), ("method=put&+Authorization=evil", "method=put"),
])
def test_an_owner_cannot_set_the_method_headers_or_fields_of_a_webhook(query, named):
    with pytest.raises(ChannelError) as refused:
        check_url(f"json://{PUBLIC}/hook?{query}")
    message = str(refused.value)
    assert f"may not set the request's {named}" in message and "\n" not in message
    assert check_url(f"json://{PUBLIC}/hook?method=POST")  # what it does anyway
    policy = ChannelPolicy.from_settings(Settings({"WEBRACE_DELIVERY_CUSTOM_REQUESTS": True}))
    assert check_url(f"json://{PUBLIC}/hook?{query}", policy)


def test_a_stored_custom_request_is_sent_only_while_the_admin_allows_it(tmp_path, recorder):
    url = recorder.url() + "?method=DELETE&+X-Custom=evil"
    settings = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1")
    stored(settings, url)
    stats, channel = one_pass(settings)
    assert recorder.requests == [] and stats["delivery/refused"] == 1
    assert "method=DELETE, +X-Custom" in channel.last_error
    stats, _ = one_pass(settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1",
                                     WEBRACE_DELIVERY_CUSTOM_REQUESTS=True))
    ((method, _, headers),) = recorder.requests
    assert stats["delivery/messages"] == 1 and method == "DELETE" and headers["X-Custom"] == "evil"


def test_the_command_refuses_what_the_policy_refuses_in_one_line(tmp_path, capsys, recorder):
    settings = settings_for(tmp_path)
    for url, says in ((recorder.url(), "127.0.0.1 is not a public address"),
                      (f"json://{PUBLIC}/x?method=DELETE", "may not set the request's method=DELETE"),
                      ("ntfy://ntfy.sh/topic", "scheme ntfy:// is not allowed here")):
        code, out, err = run_command(settings, capsys, "channel", "add", "alice", url)
        assert code == 1 and out == "" and err.startswith("error: channel URL") and says in err
        assert err.count("\n") == 1
    with open_delivery_store(settings) as store:
        assert store.channels() == []


# -- what an owner is shown ----------------------------------------------------------------


def test_an_owner_cannot_tell_a_closed_port_from_an_error_status(tmp_path, recorder):
    """Port scanning through the status: a refused connection and an HTTP 500 read the same
    to the owner; the admin sees each one's error."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]  # bound, not listening: connections are refused
    recorder.status = 500
    settings = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1", WEBRACE_DELIVERY_FAILING_AFTER=1)
    stored(settings, recorder.url(), owner="alice")
    stored(settings, f"json://127.0.0.1:{closed_port}/hook", owner="bob")
    clock = Clock()
    try:
        for _ in range(2):  # retrying, then failing
            store_items(settings, [aci("alice", "/a", clock.now), aci("bob", "/b", clock.now)])
            DeliveryAgent(settings, clock=clock).run_pass()
            clock.advance(1000)
    finally:
        closed.close()
    with open_channels(settings) as channels:
        owners = {row["owner"]: row for row in channels.list()}
        admin = {row["owner"]: row for row in channels.list(errors=True)}
    assert len(recorder.requests) == 2
    assert owners["alice"]["status"].split(" (")[1] == owners["bob"]["status"].split(" (")[1] == "2 failures in a row)"
    for row in owners.values():
        assert "last_error" not in row and "Connection" not in json.dumps(row) and "error=500" not in json.dumps(row)
    assert "500" in admin["alice"]["last_error"] and "Connection" in admin["bob"]["last_error"]


# -- channel URLs encrypted at rest ----------------------------------------------------------


SECRET_URL = f"mailtos://alice:Pa55-w0rd-s3cret@{PUBLIC}?to=alice@example.org"


def _files(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data.glob("delivery.sqlite*")))


def test_sqlite_keeps_no_password_and_the_key_is_private(tmp_path):
    settings = settings_for(tmp_path)
    with open_channels(settings) as channels:
        channels.add("alice", SECRET_URL)
        (row,) = channels.list("alice")
    data = tmp_path / "data"
    assert b"Pa55-w0rd-s3cret" not in _files(data) and b"alice@example.org" not in _files(data)
    assert stat.S_IMODE((data / KEY_FILE).stat().st_mode) == 0o600
    with open_delivery_store(settings) as store:
        assert store.channels()[0].url == SECRET_URL
    assert "Pa55" not in row["shown"]


def test_a_plain_sqlite_row_of_an_older_data_directory_is_read_and_rewritten_encrypted(tmp_path, recorder):
    settings = settings_for(tmp_path, WEBRACE_DELIVERY_ALLOW_HOSTS="127.0.0.1")
    url = recorder.url().replace("json://", "json://hook:Pa55-w0rd-s3cret@")
    with open_delivery_store(settings):  # the schema
        pass
    db = tmp_path / "data" / "delivery.sqlite"
    with sqlite3.connect(db) as conn:  # as a version before encryption wrote it
        conn.execute("INSERT INTO channel (id, owner, url, events, since) VALUES (?, 'alice', ?, 'aci', 0)",
                     (channel_id("alice", url), url))
    conn.close()
    assert b"Pa55-w0rd-s3cret" in _files(tmp_path / "data")
    stats, channel = one_pass(settings)
    assert stats["delivery/messages"] == 1 and channel.url == url and len(recorder.requests) == 1
    assert b"Pa55-w0rd-s3cret" not in _files(tmp_path / "data")


def test_redis_keeps_no_password_and_reads_a_plain_record_of_before(tmp_path, redis_url, redis_prefix):
    import redis

    settings = settings_for(tmp_path, REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix)
    client = redis.Redis.from_url(redis_url)
    with open_channels(settings) as channels:
        cid = channels.add("alice", SECRET_URL)
    raw = client.hget(f"{redis_prefix}delivery:channel", cid)
    assert b"Pa55-w0rd-s3cret" not in raw and b"alice@example.org" not in raw
    plain_url = SECRET_URL.replace("alice:", "bob:")
    plain = {"id": "old", "owner": "bob", "url": plain_url, "events": ["aci"]}
    client.hset(f"{redis_prefix}delivery:channel", "old", json.dumps(plain))  # as an older version wrote it
    with open_delivery_store(settings) as store:
        urls = {c.id: c.url for c in store.channels()}
    assert urls == {cid: SECRET_URL, "old": plain_url}
    assert b"Pa55-w0rd-s3cret" not in client.hget(f"{redis_prefix}delivery:channel", "old")


def test_processes_sharing_the_key_setting_share_channels_and_others_leave_them_alone(
        tmp_path, recorder, redis_url, redis_prefix):
    """Distributed mode: the web app adds (one data directory), a worker elsewhere sends (its
    own): with the same WEBRACE_DELIVERY_CHANNEL_KEY it can; one with another key neither
    sends nor counts a failure, and says why."""
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    common = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix, "WEBRACE_DELIVERY_ALLOW_HOSTS": "127.0.0.1"}
    web = make_settings(tmp_path / "web", WEBRACE_DELIVERY_CHANNEL_KEY=key, **common)
    with open_channels(web) as channels:
        channels.add("alice", recorder.url(), since=0)
    store_items(web, [aci("alice", "/a", now_millis())])
    stranger = make_settings(tmp_path / "stranger", **common)  # its own data directory's key
    report = DeliveryAgent(stranger).run_pass()
    assert report.stats["delivery/undecryptable"] == 1 and report.stats["delivery/failed"] == 0
    with open_channels(stranger) as channels:
        assert channels.list()[0]["shown"] == UNREADABLE
    worker = make_settings(tmp_path / "worker", WEBRACE_DELIVERY_CHANNEL_KEY=key, **common)
    assert DeliveryAgent(worker).run_pass().stats["delivery/messages"] == 1 and len(recorder.requests) == 1


def test_a_bad_channel_key_is_one_line(tmp_path, capsys):
    settings = settings_for(tmp_path, WEBRACE_DELIVERY_CHANNEL_KEY="not-a-key")
    code, out, err = run_command(settings, capsys, "channel", "list")
    assert code == 1 and err.startswith("error: WEBRACE_DELIVERY_CHANNEL_KEY: the channel key is not a Fernet key")
    assert err.count("\n") == 1


def test_channels_default_to_the_default_policy():
    """A Channels without settings (a script's) is as strict as the defaults."""
    with pytest.raises(ChannelError, match="not a public address"):
        Channels(store=None).add("alice", "json://127.0.0.1:9/x")
