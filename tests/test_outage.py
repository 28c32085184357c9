"""Redis going away and coming back under every long-running process (issue 44): one line
when it goes, one when it is back, a backoff between tries (webrace/backends/outage.py), and
no traceback, ever; each process goes on doing its job afterwards."""

from __future__ import annotations

import pytest
import redis
from conftest import Project, RedisServer, urd

from webrace.backends.outage import Outage, keep_going

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
