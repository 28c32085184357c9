"""docs/redis-persistence.md: what a restart of the Redis process loses in each mode, shown on
a real redis-server killed with SIGKILL and started again on its files; and the recipe of the
docs (docs/how-to/distributed.md, docs/redis-persistence.md) is the mode the restart tests of
tests/test_outage.py use."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import redis
from conftest import RedisServer
from test_outage import PERSISTENCE

DOCS = Path(__file__).resolve().parent.parent / "docs"
RECIPES = [DOCS / "how-to" / "distributed.md", DOCS / "redis-persistence.md"]
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


def recipe_options(line: str) -> tuple[str, ...]:
    """A ``redis-server`` line's persistence options: where it listens and its password (a
    page's own) and a trailing ``&`` left out."""
    words = shlex.split(line.split("#", 1)[0])[1:]
    if words[-1:] == ["&"]:
        words.pop()
    for option in ("--port", "--bind", "--requirepass"):
        while option in words:
            at = words.index(option)
            del words[at:at + 2]
    return tuple(words)


def test_the_docs_recipe_is_the_mode_the_restart_tests_use():
    lines = [line.removeprefix("$ ") for page in RECIPES for line in page.read_text(encoding="utf-8").splitlines()
             if line.removeprefix("$ ").startswith("redis-server ")]
    assert len(lines) >= 3  # the guide's run on one machine and on many, and the persistence page's
    assert {recipe_options(line) for line in lines} == {PERSISTENCE["aof"]} == {MODES["always"]}
    assert "](../redis-persistence.md)" in RECIPES[0].read_text(encoding="utf-8")
