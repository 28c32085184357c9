"""`scrapy crawl` (webrace/commands/crawl.py): its exit status says what happened."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
from conftest import urd

from webrace import settings as webrace_settings
from webrace.commands.crawl import not_emitted, nothing_fetched


@pytest.mark.parametrize(("stats", "failed"), [
    ({}, None),  # nothing was due
    ({"webrace/ignored/robots": 3}, None),  # robots.txt said no: an answer
    ({"webrace/pages": 1, "webrace/failed/http_404": 1}, None),  # a 404 is an answer
    ({"webrace/pages": 5, "webrace/failed/refused": 9}, None),  # some pages came back
    ({"webrace/failed/refused": 2}, "nothing could be fetched: every fetch failed (refused 2)"),
    ({"webrace/failed/dns": 1, "webrace/failed/timeout": 2, "webrace/failed/refused": 0},
     "nothing could be fetched: every fetch failed (dns 1, timeout 2)"),
    ({"webrace/ignored/robots_unreachable": 4}, "nothing could be fetched: every fetch failed (robots_unreachable 4)"),
])
def test_a_crawl_fails_when_it_tried_and_got_not_one_page(stats, failed):
    found = nothing_fetched(stats)
    assert (found and found.split(";")[0]) == failed


@pytest.mark.parametrize(("stats", "failed"), [
    ({}, None),
    ({"webrace/pages": 3, "webrace/unemitted": 0}, None),
    ({"webrace/pages": 3, "webrace/unemitted": 2}, "2 fetched page(s) were not emitted: their processing failed"),
])
def test_a_crawl_fails_when_a_fetched_page_was_not_emitted(stats, failed):
    found = not_emitted(stats)
    assert (found and found.split(" (")[0]) == failed


def test_a_crawl_whose_page_raised_in_processing_exits_1_naming_it(site, project):
    """Issue 44: a worker whose pages all raised ("Task got bad yield") exited 0 with 0 items."""
    site.html("/", ["/a", "/b"])
    site.html("/a")
    site.html("/b")
    project.add_urds(urd("u", "alice", site.url("/"), depth=1))
    middlewares = {**webrace_settings.SPIDER_MIDDLEWARES, "faults.RaiseOnPages": 1000}
    run = project.crawl(SPIDER_MIDDLEWARES=json.dumps(middlewares), TEST_RAISE_PATHS="/a")
    assert sorted(site.paths()) == ["/", "/a", "/b"]
    assert sorted(p["url"] for p in run.pages) == [site.url("/"), site.url("/b")]
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("error: 1 fetched page(s) were not emitted")
    assert "their processing failed (RuntimeError)" in run.stderr


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound, never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_crawl_where_every_connection_is_refused_exits_1(project, refusing_port):
    project.add_urds(urd("dead", "alice", f"http://127.0.0.1:{refusing_port}/"))
    run = project.crawl()
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("error: nothing could be fetched: every fetch failed (")
    assert "refused" in run.stderr.strip().splitlines()[-1]


def test_crawl_answered_with_a_404_exits_0(site, project):
    project.add_urds(urd("gone", "alice", site.url("/gone.html")))
    run = project.crawl()
    assert run.returncode == 0, run.stderr
    assert [p["status"] for p in run.pages] == [404]


def test_crawl_with_nothing_due_exits_0(project):
    run = project.crawl()  # no URD registered
    assert run.returncode == 0, run.stderr
    assert "No URD registered" in run.stderr


def test_crawl_of_an_unknown_urd_id_is_refused_with_one_line(site, project):
    site.html("/")
    project.add_urds(urd("a", "alice", site.url("/")))
    done = project.scrapy(*project.crawl_args(project.root / "pages.jsonl", "-a", "urd=a,nosuch"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["error: no URD with id nosuch (see `scrapy urd list`)", "Nothing was crawled."]
    assert site.paths() == [] and not (project.root / "pages.jsonl").exists()


def test_crawl_of_a_known_urd_id_exits_0(site, project):
    site.html("/")
    project.add_urds(urd("a", "alice", site.url("/")), urd("b", "bob", site.url("/b")))
    run = project.crawl("-a", "urd=a")
    assert run.returncode == 0, run.stderr
    assert site.paths() == ["/"]


def test_an_urd_id_given_to_a_distributed_worker_is_refused_not_ignored(site, project, redis_url, redis_prefix):
    """A worker takes the rounds `urd schedule` opens: `-a urd=ID` would be ignored, an unknown
    id included, and the job would end as if it had been obeyed (exit 0, nothing said)."""
    site.html("/")
    project.add_urds(urd("a", "alice", site.url("/")))
    project.env.update(REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix)
    done = project.scrapy(*project.crawl_args(project.root / "pages.jsonl", "-a", "urd=nosuch",
                                              "-s", "WEBRACE_IDLE_CLOSE=1"))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: -a urd=ID is for embedded crawls: distributed workers crawl the rounds `scrapy urd schedule` "
        "opens (make a URD due for the next one with `scrapy urd due ID`)", "Nothing was crawled."]
    assert site.paths() == []
