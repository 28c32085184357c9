"""docs/redis-persistence.md: what a restart of the Redis process loses in each mode, shown on
a real redis-server killed with SIGKILL and started again on its files; and the README's recipe
is the mode the restart tests of tests/test_outage.py use."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import redis
from conftest import RedisServer
from test_outage import PERSISTENCE

README = Path(__file__).resolve().parent.parent / "README.md"
MODES = {"none": ("--appendonly", "no"), "everysec": ("--appendonly", "yes", "--appendfsync", "everysec"),
         "always": ("--appendonly", "yes", "--appendfsync", "always")}


@pytest.mark.parametrize(("mode", "lost"), [("none", 300), ("everysec", 0), ("always", 0)])
def test_a_redis_killed_and_started_again_loses_what_the_docs_say(redis_binary, tmp_path, mode, lost):
    server = RedisServer.launch(redis_binary, tmp_path, *MODES[mode])
    try:
        client = redis.Redis.from_url(server.url)
        for n in range(300):  # acknowledged one by one, as a worker's records are
            client.set(f"url:http://site.test/{n}", b"x" * 370)
        server.kill()
        server.start()
        kept = redis.Redis.from_url(server.url).exists(*[f"url:http://site.test/{n}" for n in range(300)])
    finally:
        server.kill()
    assert 300 - kept == lost


def test_the_readme_recipe_is_the_mode_the_restart_tests_use():
    (line,) = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("redis-server ")]
    options = tuple(shlex.split(line.split("#", 1)[0])[1:])
    assert options == PERSISTENCE["aof"] == MODES["always"]
    assert re.search(r"\[docs/redis-persistence\.md\]\(docs/redis-persistence\.md\)", README.read_text())
