"""Distributed mode against the real Redis: workers lease pages of shared rounds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading

import pytest
import redis
from conftest import HANG, Project, RedisServer, urd


@pytest.fixture
def redis_env(redis_url, redis_prefix, tmp_path):
    """The distributed mode's settings: one Redis, and one body store every worker mounts."""
    return {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
            "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects")}


def worker_project(tmp_path, name: str, redis_env: dict) -> Project:
    root = tmp_path / name
    root.mkdir()
    project = Project(root)
    project.env.update(redis_env)
    return project


def start_worker(project: Project, **settings) -> tuple[subprocess.Popen, object]:
    out = project.root / "pages.jsonl"
    args = project.crawl_args(out, **{"WEBRACE_IDLE_CLOSE": 1.5, **settings})
    proc = subprocess.Popen([sys.executable, "-m", "scrapy", *args], cwd=project.root, env=project.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, out


def finish(project: Project, proc: subprocess.Popen, out, timeout: float = 180) -> object:
    stdout, stderr = proc.communicate(timeout=timeout)
    return project.run_result(proc.returncode, stdout, stderr, out)


def schedule(project: Project) -> str:
    done = project.scrapy("urd", "schedule")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def wide_site(site):
    site.validators = True
    site.delay = 0.05
    site.html("/", [f"/p{i}.html" for i in range(30)])
    for i in range(30):
        site.html(f"/p{i}.html", ["/", f"/p{(i + 1) % 30}.html"])
    return site


def all_paths():
    return sorted(["/", *[f"/p{i}.html" for i in range(30)]])


def test_two_workers_share_one_round_and_fetch_every_page_once(wide_site, tmp_path, redis_env):
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1), urd("u2", "bob", wide_site.url("/"), depth=0))
    assert "opened: 2 URD(s)" in schedule(scheduler)
    a, b = worker_project(tmp_path, "a", redis_env), worker_project(tmp_path, "b", redis_env)
    # slow enough that one worker alone needs seconds for the round: the other, starting a
    # moment later on a loaded machine, still finds pages left (CI once saw one take all 31)
    wide_site.delay = 0.2
    (pa, oa), (pb, ob) = start_worker(a, WEBRACE_MAX_LEASED=2), start_worker(b, WEBRACE_MAX_LEASED=2)
    run_a, run_b = finish(a, pa, oa), finish(b, pb, ob)
    assert run_a.returncode == 0 and run_b.returncode == 0, run_a.stderr[-2000:] + run_b.stderr[-2000:]
    assert sorted(wide_site.paths()) == all_paths()  # every page exactly once
    assert run_a.items and run_b.items, (run_a.stderr[-3000:], run_b.stderr[-1500:])  # both did work
    items = {i["url"]: i for i in run_a.items + run_b.items}
    assert sorted(items) == sorted(wide_site.url(p) for p in all_paths())
    assert items[wide_site.url("/")]["owners"] == ["alice", "bob"]
    assert items[wide_site.url("/p3.html")]["owners"] == ["alice"]
    assert "done" in schedule(scheduler)
    listed = [json.loads(line) for line in scheduler.scrapy("urd", "list", "--format", "jsonl").stdout.splitlines()]
    assert all(r["lastcheck"] is not None and not r["due"] for r in listed)


def test_next_round_is_recrawled_conditionally_by_another_worker(wide_site, tmp_path, redis_env):
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    a = worker_project(tmp_path, "a", redis_env)
    first = finish(a, *start_worker(a))
    assert len(first.items) == 31
    # each page's record is read with its lease (one round trip for several), not by its request
    assert first.stat("recrawl/preloaded") == 31 and first.stat("recrawl/first_fetch") == 31
    schedule(scheduler)  # closes round 1
    scheduler.make_due()
    assert "opened" in schedule(scheduler)  # round 2: not filtered by anything of round 1
    wide_site.clear_hits()
    b = worker_project(tmp_path, "b", redis_env)  # its own data dir: the cache is in Redis
    second = finish(b, *start_worker(b))
    assert len(second.items) == 31 and all(i["not_modified"] for i in second.items)
    assert second.stat("recrawl/preloaded") == 31 and second.stat("recrawl/conditional") == 31
    assert set(wide_site.statuses().values()) == {304}


def feed_urls(path) -> set[str]:
    """The URLs of the pages in a JSON-lines feed (a line cut short by a kill is skipped)."""
    urls = set()
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "status" in item:
            urls.add(item["url"])
    return urls


def test_killed_worker_loses_no_page_from_the_feeds(wide_site, tmp_path, redis_env):
    """Issue 18 (c): a page's lease ends only once its item is in the worker's feed, so the
    union of the workers' feeds holds every page after a `kill -9` (the other worker fetches
    again what the killed one had not written)."""
    wide_site.delay = 0.1
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    a = worker_project(tmp_path, "a", redis_env)
    proc, out_a = start_worker(a, WEBRACE_LEASE_TIMEOUT=2, CONCURRENT_REQUESTS=4, WEBRACE_IDLE_CLOSE="")
    for line in proc.stderr:  # wait until worker A is in the middle of the round
        if "Scraped from" in line and len(wide_site.paths()) >= 6:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(set(wide_site.paths())) < 31
    b = worker_project(tmp_path, "b", redis_env)
    run_b = finish(b, *start_worker(b, WEBRACE_IDLE_CLOSE=5))
    assert run_b.returncode == 0
    assert set(wide_site.paths()) == set(all_paths())  # every page of the round fetched
    assert feed_urls(out_a) | {i["url"] for i in run_b.items} == {wide_site.url(p) for p in all_paths()}
    assert "done" in schedule(scheduler)


def test_schedule_without_redis_url_is_a_usage_error(project):
    result = project.scrapy("urd", "schedule")
    assert result.returncode == 2 and "REDIS_URL" in result.stderr


def test_crawls_print_no_deprecation_warning_in_either_mode(wide_site, tmp_path, redis_env):
    embedded = worker_project(tmp_path, "embedded", {})
    embedded.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    embedded.env["PYTHONWARNINGS"] = "always::DeprecationWarning"
    run = embedded.crawl()
    assert len(run.items) == 31
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    worker = worker_project(tmp_path, "worker", redis_env)
    worker.env["PYTHONWARNINGS"] = "always::DeprecationWarning"
    distributed = finish(worker, *start_worker(worker))
    assert len(distributed.items) == 31
    for stderr in (run.stderr, distributed.stderr):
        assert "DeprecationWarning" not in stderr and "deprecated" not in stderr.lower()


def test_unreachable_redis_at_start_is_one_clear_error_once_the_start_wait_is_over(project):
    project.env["REDIS_URL"] = "redis://:s3cret@127.0.0.1:1/0"
    result = project.scrapy("crawl", "urd", "-s", "WEBRACE_REDIS_START_WAIT=1.5")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Redis unreachable (Cannot reach Redis at redis://:***@127.0.0.1:1/0"), lines
    assert lines[1:] == ["error: Cannot reach Redis at redis://:***@127.0.0.1:1/0: Error 111 connecting to "
                         "127.0.0.1:1. Connection refused. Start it, fix REDIS_URL, or unset REDIS_URL to run "
                         "embedded.", "Nothing was crawled."], lines
    assert "s3cret" not in result.stderr


def test_a_worker_with_no_start_wait_and_no_redis_is_one_error_line_at_once(project):
    project.env["REDIS_URL"] = "redis://:s3cret@127.0.0.1:1/0"
    result = project.scrapy("crawl", "urd", "-s", "WEBRACE_REDIS_START_WAIT=0")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0].startswith("error: Cannot reach Redis at redis://:***@127.0.0.1:1/0")
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def private_redis(redis_binary, tmp_path):
    """A redis-server of the test's own (it is killed and restarted), persisting every write."""
    server = RedisServer.launch(redis_binary, tmp_path, "--appendonly", "yes", "--appendfsync", "always")
    yield server
    server.kill()


def test_redis_lost_mid_crawl_then_back_loses_no_page(wide_site, tmp_path, private_redis):
    server = private_redis
    env = {"REDIS_URL": server.url, "WEBRACE_REDIS_PREFIX": "webrace:"}
    wide_site.delay = 0.1
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    worker = worker_project(tmp_path, "worker", env)
    proc, out = start_worker(worker, WEBRACE_LEASE_TIMEOUT=2, WEBRACE_IDLE_CLOSE=10, CONCURRENT_REQUESTS=2)
    while len(wide_site.paths()) < 6:  # the worker is in the middle of the round
        line = proc.stderr.readline()
        assert line, "the worker ended early"
    server.kill()
    server.start()  # same port, same append-only file: the round is still there
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0
    assert set(wide_site.paths()) == set(all_paths())
    assert "done" in schedule(scheduler)


def test_redis_back_empty_mid_round_is_said_once_and_the_round_opens_again(wide_site, tmp_path, private_redis):
    """Issue 18 (d): Redis restarts without its data while a worker crawls a round."""
    server = private_redis
    env = {"REDIS_URL": server.url, "WEBRACE_REDIS_PREFIX": "webrace:"}
    wide_site.delay = 0.1
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    loop = subprocess.Popen([sys.executable, "-m", "scrapy", "urd", "schedule", "--loop", "--interval", "0.2"],
                            cwd=scheduler.root, env=scheduler.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert "opened" in loop.stdout.readline()
    worker = worker_project(tmp_path, "worker", env)
    proc, out = start_worker(worker, WEBRACE_LEASE_TIMEOUT=2, WEBRACE_IDLE_CLOSE=6, CONCURRENT_REQUESTS=2)
    while len(wide_site.paths()) < 6:  # the worker is in the middle of the round
        assert proc.stderr.readline(), "the worker ended early"
    redis.Redis.from_url(server.url).flushall()  # as a restart without persistence would leave it
    reopened = loop.stdout.readline() + loop.stdout.readline()
    stdout, stderr = proc.communicate(timeout=180)
    loop.terminate()
    loop.communicate(timeout=30)
    assert "Redis came back empty" in reopened and "opened" in reopened, reopened
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.count("Redis came back empty") == 1
    assert set(wide_site.paths()) == set(all_paths())  # the new round crawled what was lost


def test_idle_worker_polls_redis_with_backoff_and_stops_when_told(tmp_path, private_redis):
    client = redis.Redis.from_url(private_redis.url)
    worker = worker_project(tmp_path, "worker", {"REDIS_URL": private_redis.url})
    before = client.info("stats")["total_commands_processed"]
    run = finish(worker, *start_worker(worker, WEBRACE_IDLE_CLOSE=4))
    after = client.info("stats")["total_commands_processed"]
    assert run.returncode == 0 and "No work for" in run.stderr
    # polling 50 ms doubling to 2 s for ~4-9 s is a few dozen commands; a busy loop would be thousands
    assert after - before < 300


def test_every_key_a_round_writes_is_under_the_prefix(wide_site, tmp_path, private_redis):
    env = {"REDIS_URL": private_redis.url, "WEBRACE_REDIS_PREFIX": "team-a:"}
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(urd("urd", "alice", wide_site.url("/"), depth=1))  # a URD named like the spider
    schedule(scheduler)
    worker = worker_project(tmp_path, "worker", env)
    assert len(finish(worker, *start_worker(worker)).items) == 31
    keys = [k.decode() for k in redis.Redis.from_url(private_redis.url).keys("*")]
    assert keys and all(k.startswith("team-a:") for k in keys)


def test_workers_annotate_into_the_shared_aci_store(wide_site, tmp_path, redis_env):
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    # every page's title is its path: alice cares about p7, bob (start page only) about p3
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1, keywords={"p7": 2}),
                       urd("u2", "bob", wide_site.url("/"), depth=0, keywords={"p3": 1}))
    schedule(scheduler)
    a, b = worker_project(tmp_path, "a", redis_env), worker_project(tmp_path, "b", redis_env)
    (pa, oa), (pb, ob) = start_worker(a), start_worker(b)
    run_a, run_b = finish(a, pa, oa), finish(b, pb, ob)
    assert run_a.returncode == 0 and run_b.returncode == 0, run_a.stderr[-2000:] + run_b.stderr[-2000:]
    acis = run_a.acis + run_b.acis
    assert [(x["owner"], x["uri"], x["relevance"]) for x in acis] == [("alice", wide_site.url("/p7.html"), 2)]
    listed = scheduler.scrapy("aci", "list", "--owner", "alice", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line)["id"] for line in listed] == [acis[0]["id"]]  # in Redis, for every machine
    pages = {p["url"]: p for p in run_a.pages + run_b.pages}
    assert pages[wide_site.url("/p7.html")]["kept"] and not pages[wide_site.url("/")]["kept"]
    assert scheduler.scrapy("store", "versions", wide_site.url("/")).returncode == 1  # body dropped
    assert scheduler.scrapy("store", "versions", wide_site.url("/p7.html")).returncode == 0


def test_workers_run_rules_into_the_shared_results_table(wide_site, tmp_path, redis_env):
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    template = scheduler.write("template.xml", '<template><rule name="Visits" class="rule_fixtures.Visits"/>'
                                               '</template>')
    a, b = worker_project(tmp_path, "a", redis_env), worker_project(tmp_path, "b", redis_env)
    (pa, oa) = start_worker(a, WEBRACE_RULES_TEMPLATE=template)
    (pb, ob) = start_worker(b, WEBRACE_RULES_TEMPLATE=template)
    run_a, run_b = finish(a, pa, oa), finish(b, pb, ob)
    assert run_a.returncode == 0 and run_b.returncode == 0, run_a.stderr[-2000:] + run_b.stderr[-2000:]
    exported = scheduler.scrapy("results", "export", "-o", "-", "--rule", "Visits")
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert sorted(r["url"] for r in rows) == sorted(wide_site.url(p) for p in all_paths())  # each page once
    assert sorted(r["seq"] for r in rows) == list(range(1, len(all_paths()) + 1))  # one numbering for all workers


# -- issue 23: no Redis round trip on the reactor thread --------------------------------------


def test_worker_reactor_thread_sends_no_redis_command_while_crawling(wide_site, tmp_path, redis_env):
    """Leases, link offers, finishes and acks go through the worker's Redis thread: a
    wrapper around the real client (tests/redis_threads.py) records the thread of every
    command sent while the engine runs."""
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    worker = worker_project(tmp_path, "worker", redis_env)
    calls = tmp_path / "redis-calls.json"
    run = finish(worker, *start_worker(worker, ADDONS=json.dumps({"redis_threads.ReactorRedisCalls": 0}),
                                       WEBRACE_TEST_REDIS_CALLS=calls))
    assert run.returncode == 0 and len(run.items) == 31, run.stderr[-3000:]
    recorded = json.loads(calls.read_text())
    assert recorded["reactor"] == []
    # the wrapper saw the crawl's commands: offers and finishes in the engine's Redis thread,
    # leases and acks in the scheduler's
    threads = recorded["threads"]
    assert threads.get("PoolThread-webrace-redis-0", 0) >= 31 * 2, threads
    assert threads.get("PoolThread-webrace-leases-0", 0) >= 2 * 10, threads
    assert "done" in schedule(scheduler)


def first_leaf_hangs(site, paths) -> threading.Event:
    """The first request for any of ``paths`` gets no answer (the worker's only download
    slot stays busy); later ones are answered as usual. The event is set when it came."""
    hung = threading.Event()
    lock = threading.Lock()

    def route(path):
        page = site.routes[(None, path)]

        def answer():
            with lock:
                if not hung.is_set():
                    hung.set()
                    return HANG
            return page
        return answer

    for path in paths:
        site.routes[(None, path)] = route(path)
    return hung


def round_whose_first_leaf_hangs(wide_site, tmp_path, redis_env):
    """A scheduled round of the root and 30 leaves, the first leaf requested never answered."""
    wide_site.delay = 0
    hung = first_leaf_hangs(wide_site, [f"/p{i}.html" for i in range(30)])
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    scheduler.add_urds(urd("u1", "alice", wide_site.url("/"), depth=1))
    schedule(scheduler)
    return scheduler, hung


def test_worker_killed_with_leases_buffered_loses_no_page(wide_site, tmp_path, redis_env):
    """Leases taken ahead and not fetched yet die with the worker: they expire and another
    worker fetches their pages (at-least-once, as for pages being fetched)."""
    scheduler, hung = round_whose_first_leaf_hangs(wide_site, tmp_path, redis_env)
    a = worker_project(tmp_path, "a", redis_env)
    proc, out_a = start_worker(a, WEBRACE_LEASE_TIMEOUT=2, CONCURRENT_REQUESTS=1, WEBRACE_MAX_LEASED=4,
                               WEBRACE_IDLE_CLOSE="")
    buffered = []
    for line in proc.stderr:  # the root page's links are offered, and A leases 4 of them ahead
        if "Leased 4 pages ahead" in line:
            buffered = line.rsplit(": ", 1)[1].split()
            break
    assert hung.wait(60)  # A fetches the first of them (and never gets it), the others wait in its buffer
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    requested = {wide_site.url(p) for p in wide_site.paths()}
    assert len(buffered) == 4 and set(buffered) - requested  # leased, never requested
    b = worker_project(tmp_path, "b", redis_env)
    run_b = finish(b, *start_worker(b, WEBRACE_IDLE_CLOSE=5))
    assert run_b.returncode == 0, run_b.stderr[-3000:]
    assert set(wide_site.paths()) == set(all_paths())
    assert feed_urls(out_a) | {i["url"] for i in run_b.items} == {wide_site.url(p) for p in all_paths()}
    assert "done" in schedule(scheduler)


def test_stopped_worker_gives_its_buffered_leases_back_at_once(wide_site, tmp_path, redis_env):
    """A worker stopped (SIGTERM) with leases taken ahead puts their pages back in the queue
    as it closes: another worker fetches them without waiting for the leases to expire
    (WEBRACE_LEASE_TIMEOUT is 300 s here, longer than the test's timeout)."""
    scheduler, hung = round_whose_first_leaf_hangs(wide_site, tmp_path, redis_env)
    a = worker_project(tmp_path, "a", redis_env)
    proc, out_a = start_worker(a, CONCURRENT_REQUESTS=1, WEBRACE_MAX_LEASED=4, WEBRACE_IDLE_CLOSE="",
                               DOWNLOAD_TIMEOUT=5)
    for line in proc.stderr:
        if "Leased 4 pages ahead" in line:
            break
    assert hung.wait(60)
    proc.send_signal(signal.SIGTERM)  # graceful: the hung download is cancelled, the leases ahead given back
    run_a = finish(a, proc, out_a)
    assert run_a.returncode == 0
    b = worker_project(tmp_path, "b", redis_env)
    run_b = finish(b, *start_worker(b, WEBRACE_IDLE_CLOSE=3))
    fetched = {i["url"] for i in run_a.items + run_b.items}
    cut = {wide_site.url(p) for p in wide_site.paths()} - fetched  # the page A was fetching when stopped
    assert len(cut) <= 1
    assert fetched | cut == {wide_site.url(p) for p in all_paths()}
