"""Redis going away and coming back under every long-running process (issue 44): one line
when it goes, one when it is back, a backoff between tries (webrace/backends/outage.py), and
no traceback, ever; each process goes on doing its job afterwards."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import pytest
import redis
from conftest import Project, RedisServer, urd
from test_delivery import aci, add_channel, hook, hook_server, make_settings, store_items, undelivered  # noqa: F401
from test_distributed import all_paths, feed_urls, redis_env, wide_site, worker_project  # noqa: F401 - fixtures
from web_client import Client

from webrace.outage import Outage, keep_going
from webrace.urd import now_millis
from webrace.web.accounts import open_accounts

PERSISTENCE = {"aof": ("--appendonly", "yes", "--appendfsync", "always"), "none": ("--appendonly", "no")}


@pytest.fixture(params=sorted(PERSISTENCE))
def restartable_redis(request, redis_binary, tmp_path):
    """A redis-server of the test's own, to kill and start again: with its data (an append-only
    file fsynced on every write) or without any (it comes back empty)."""
    server = RedisServer.launch(redis_binary, tmp_path, *PERSISTENCE[request.param])
    server.persistence = request.param
    yield server
    server.kill()


def scheduler_project(tmp_path, server) -> Project:
    root = tmp_path / "scheduler"
    root.mkdir()
    project = Project(root)
    project.env.update(REDIS_URL=server.url, WEBRACE_REDIS_PREFIX="webrace:")
    return project


def test_schedule_loop_outlives_a_redis_restart_and_opens_rounds_after(tmp_path, restartable_redis):
    server = restartable_redis
    scheduler = scheduler_project(tmp_path, server)
    scheduler.add_urds(urd("u1", "alice", "http://127.0.0.1:9/a"))  # no worker: the round stays open
    loop = scheduler.start("urd", "schedule", "--loop", "--interval", "0.2")
    try:
        loop.wait_for("opened", "u1")
        server.kill()
        down = loop.wait_for("Redis unreachable")
        scheduler.add_urds(urd("u2", "bob", "http://127.0.0.1:9/b"))  # due while Redis is away
        server.start()
        opened = loop.wait_for("opened", "u2", after=down)
    finally:
        code = loop.stop()
    lines = loop.text
    assert "Traceback" not in lines and code == 0, lines
    assert lines.count("Redis unreachable") == 1 and "Redis reachable again" in lines, lines
    if server.persistence == "none":  # u1's round was lost with Redis: it is crawled again
        assert "Redis came back empty" in lines and "u1" in loop.lines[opened][1], lines
    else:  # u1's round is still open: not opened twice
        assert "u1" not in loop.lines[opened][1], lines


def test_schedule_loop_started_while_redis_is_away_waits_for_it_and_opens_the_round(tmp_path, redis_binary):
    server = RedisServer.launch(redis_binary, tmp_path, *PERSISTENCE["none"])
    scheduler = scheduler_project(tmp_path, server)
    scheduler.add_urds(urd("u1", "alice", "http://127.0.0.1:9/a"))
    server.kill()
    loop = scheduler.start("urd", "schedule", "--loop", "--interval", "0.2")
    try:
        loop.wait_for("Redis unreachable")
        server.start()
        loop.wait_for("opened", "u1")
    finally:
        code = loop.stop()
        server.kill()
    lines = loop.text
    assert "Traceback" not in lines and "error:" not in lines and code == 0, lines
    assert lines.count("Redis unreachable") == 1 and lines.count("Redis reachable again") == 1, lines


def test_schedule_once_with_redis_away_is_one_error_line(tmp_path, redis_binary):
    server = RedisServer.launch(redis_binary, tmp_path, *PERSISTENCE["none"])
    scheduler = scheduler_project(tmp_path, server)
    server.kill()
    done = scheduler.scrapy("urd", "schedule")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: Cannot reach Redis at {server.url}: Error 111 connecting to "
                                        f"127.0.0.1:{server.port}. Connection refused. Start it, fix REDIS_URL, "
                                        "or unset REDIS_URL to run embedded."], done.stderr

def test_outage_waits_one_second_doubling_to_thirty_and_is_said_once_each_way():
    said, now = [], [100.0]
    outage = Outage(said.append, clock=lambda: now[0])
    down = redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    waits = [outage.failed(down) for _ in range(8)]
    now[0] += 93
    outage.ok()
    outage.ok()
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]
    assert said == ["Redis unreachable (Error 111 connecting to 127.0.0.1:6379. Connection refused): trying again "
                    "in 1 s, then less and less often (at most every 30 s)",
                    "Redis reachable again after 93 s (8 failed tries)"]
    assert outage.failed(down) == 1 and len(said) == 3  # a new outage starts over


def test_a_loop_goes_on_through_a_real_redis_restart_with_backoff(redis_binary, tmp_path):
    server = RedisServer.launch(redis_binary, tmp_path, "--appendonly", "no")
    client = redis.Redis.from_url(server.url)
    said, waits = [], []

    def wait(seconds: float) -> bool:  # the loop's pace, recorded; Redis killed and started between passes
        waits.append(seconds)
        if len(waits) == 1:
            server.kill()
        elif len(waits) == 8:
            server.start()
        return len(waits) == 10

    try:
        keep_going(lambda: client.incr("passes"), 0.2, Outage(said.append), wait)
    finally:
        server.kill()
    assert waits == [0.2, 1, 2, 4, 8, 16, 30, 30, 0.2, 0.2]
    assert [line.split(" (")[0].split(" after")[0] for line in said] == ["Redis unreachable", "Redis reachable again"]


def test_deliver_loop_outlives_a_redis_restart_and_delivers_after(tmp_path, restartable_redis, hook):  # noqa: F811
    server = restartable_redis
    project = scheduler_project(tmp_path, server)
    project.env["WEBRACE_DELIVERY_ALLOW_HOSTS"] = "127.0.0.1"  # the webhook receiver's
    settings = project.settings()
    settings.set("WEBRACE_DELIVERY_ALLOW_HOSTS", "127.0.0.1")
    add_channel(settings, "alice", hook.url())
    store_items(settings, [aci("alice", "/before", now_millis())])
    loop = project.start("deliver", "--loop", "--interval", "0.2", "-s", "WEBRACE_DELIVERY_ALLOW_HOSTS=127.0.0.1")
    try:
        loop.wait_for("1 message(s) sent")
        server.kill()
        down = loop.wait_for("Redis unreachable")
        server.start()
        if server.persistence == "none":  # the channel went with Redis's data: the owner adds it again
            add_channel(settings, "alice", hook.url())
        store_items(settings, [aci("alice", "/after", now_millis())])
        loop.wait_for("1 message(s) sent", after=down)
    finally:
        code = loop.stop()
    lines = loop.text
    assert "Traceback" not in lines and code == 0, lines
    assert lines.count("Redis unreachable") == 1 and "Redis reachable again" in lines, lines
    texts = hook.messages()
    assert len(texts) == 2 and "/before" in texts[0] and "/after" in texts[1] and "/before" not in texts[1], texts


def test_web_serve_answers_503_while_redis_is_away_and_serves_again_after(tmp_path, restartable_redis):
    server = restartable_redis
    project = scheduler_project(tmp_path, server)
    settings = project.settings()
    with open_accounts(settings) as accounts:
        accounts.add("alice", "alice-secret")
    store_items(settings, [aci("alice", "/kept", now_millis())])
    web = project.start("web", "serve", "--port", "0")
    try:
        line = web.lines[web.wait_for("Serving the web app on")][1]
        client = Client(line.split(" on ", 1)[1].split("/ ", 1)[0])
        assert client.login("alice", "alice-secret").status == 302
        assert client.get("/owner/alice/").status == 200
        server.kill()
        away = [client.get("/owner/alice/") for _ in range(3)]
        web.wait_for("Redis unreachable")
        server.start()
        back = wait_until(lambda: (answer := client.get("/owner/alice/")).status == 200 and answer)
        web.wait_for("Redis reachable again")
    finally:
        code = web.stop()
    lines = web.text
    assert [answer.status for answer in away] == [503] * 3 and all(a.headers["Retry-After"] for a in away)
    assert "The shared store is unreachable" in away[0].text
    assert ("news.test/kept" in back.text) == (server.persistence == "aof")
    assert "Traceback" not in lines and lines.count("Redis unreachable") == 1, lines
    assert code == 0, lines  # SIGTERM ends it as Ctrl-C does


def wait_until(predicate, deadline_s: float = 60):
    """Poll ``predicate`` (a process's state, seen from outside) until it is true, with a deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_worker_outlives_a_redis_restart_mid_crawl_and_every_page_reaches_its_feed(
        tmp_path, restartable_redis, wide_site):  # noqa: F811 - the fixture imported
    server = restartable_redis
    wide_site.delay = 0.1
    scheduler = scheduler_project(tmp_path, server)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    loop = scheduler.start("urd", "schedule", "--loop", "--interval", "0.2")
    worker = worker_project(tmp_path, "worker", {"REDIS_URL": server.url, "WEBRACE_REDIS_PREFIX": "webrace:"})
    out = worker.root / "pages.jsonl"
    crawl = worker.start(*worker.crawl_args(out, WEBRACE_IDLE_CLOSE=4,
                                            CONCURRENT_REQUESTS=2, LOG_LEVEL="INFO"))
    try:
        loop.wait_for("opened", "u1")
        wait_until(lambda: len(wide_site.paths()) >= 6)  # the worker is in the middle of the round
        server.kill()
        crawl.wait_for("Redis unreachable")
        server.start()
        loop.wait_for("done", deadline_s=120)  # the round closed: every page of it finished
        code = crawl.proc.wait(timeout=120)
    finally:
        crawl.stop()
        loop.stop()
    said = crawl.stream("stderr")
    assert code == 0 and "Traceback" not in said and "Traceback" not in loop.text, said[-5000:]
    assert said.count("Redis unreachable") == 1 and said.count("Redis reachable again") == 1, said[-5000:]
    assert feed_urls(out) == {wide_site.url(p) for p in all_paths()}


def test_a_worker_started_while_redis_is_away_waits_for_it_then_crawls_every_page(
        tmp_path, restartable_redis, wide_site):  # noqa: F811 - the fixture imported
    server = restartable_redis
    scheduler = scheduler_project(tmp_path, server)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    worker = worker_project(tmp_path, "worker", {"REDIS_URL": server.url, "WEBRACE_REDIS_PREFIX": "webrace:"})
    out = worker.root / "pages.jsonl"
    server.kill()
    crawl = worker.start(*worker.crawl_args(out, WEBRACE_IDLE_CLOSE=4, LOG_LEVEL="INFO"))
    loop = None
    try:
        crawl.wait_for("Redis unreachable")
        server.start()
        crawl.wait_for("Redis reachable again")
        loop = scheduler.start("urd", "schedule", "--loop", "--interval", "0.2")
        loop.wait_for("done", deadline_s=120)
        code = crawl.proc.wait(timeout=120)
    finally:
        crawl.stop()
        if loop is not None:
            loop.stop()
    said = crawl.stream("stderr")
    assert code == 0 and "Traceback" not in said and " ERROR: " not in said, said[-5000:]
    assert said.count("Redis unreachable") == 1 and said.count("Redis reachable again") == 1, said[-5000:]
    assert feed_urls(out) == {wide_site.url(p) for p in all_paths()}


@pytest.fixture
def small_disk(tmp_path):
    """A filesystem of 1 MB (a real tmpfs) for the object store."""
    path = tmp_path / "small"
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=True)


def fill(disk) -> Path:
    """``disk`` filled to its last block by one file."""
    ballast = disk / "ballast"
    with open(ballast, "wb", buffering=0) as f:
        for size in (1 << 16, 512):
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass
    return ballast


def test_a_worker_waits_out_a_full_object_store_and_every_page_reaches_its_feed(
        tmp_path, redis_env, wide_site, small_disk):  # noqa: F811 - the fixture imported
    env = {**redis_env, "WEBRACE_OBJECTS_DIR": str(small_disk / "objects")}
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    worker = worker_project(tmp_path, "worker", env)
    out = worker.root / "pages.jsonl"
    crawl = worker.start(*worker.crawl_args(out, WEBRACE_IDLE_CLOSE=4, LOG_LEVEL="INFO"))
    loop = None
    try:
        crawl.wait_for("Distributed mode: taking pages")  # its object store is open
        ballast = fill(small_disk)
        loop = scheduler.start("urd", "schedule", "--loop", "--interval", "0.2")
        crawl.wait_for("The object store cannot be written")
        ballast.unlink()
        crawl.wait_for("The object store can be written again")
        loop.wait_for("done", deadline_s=120)
        code = crawl.proc.wait(timeout=120)
    finally:
        crawl.stop()
        if loop is not None:
            loop.stop()
    said = crawl.stream("stderr")
    assert code == 0 and "Traceback" not in said and " ERROR: " not in said, said[-5000:]
    assert said.count("The object store cannot be written") == 1, said[-5000:]
    assert said.count("The object store can be written again") == 1, said[-5000:]
    assert feed_urls(out) == {wide_site.url(p) for p in all_paths()}


def test_a_message_sent_just_before_redis_goes_away_is_marked_when_it_is_back_and_not_sent_again(
        tmp_path, redis_binary, hook):  # noqa: F811 - the fixture imported
    from webrace.commands import redis_away
    from webrace.delivery.agent import DeliveryAgent

    server = RedisServer.launch(redis_binary, tmp_path, *PERSISTENCE["aof"])
    try:
        settings = make_settings(tmp_path / "data", REDIS_URL=server.url, WEBRACE_REDIS_PREFIX="webrace:")
        add_channel(settings, "alice", hook.url("/one"))
        now = now_millis()
        store_items(settings, [aci("alice", f"/p{i}", now + i) for i in range(3)])
        agent = DeliveryAgent(settings)
        real = agent.sender

        def then_redis_goes(url: str, title: str, body: str, timeout: float) -> str | None:
            error = real(url, title, body, timeout)
            server.kill()  # between the send and its mark
            return error

        agent.sender = then_redis_goes
        with pytest.raises(redis_away()):
            agent.run_pass()
        server.start()
        agent.sender = real
        again = agent.run_pass()
        assert again.stats["delivery/messages"] == 0
        assert len(hook.messages("/one")) == 1 and undelivered(settings) == set()
    finally:
        server.kill()
