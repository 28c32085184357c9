"""IPMicra in the distributed mode: per-worker queues in a real Redis, and workers crawling
only the hosts delegated to them."""

from __future__ import annotations

import json

import pytest
import redis
from conftest import Project, urd
from scrapy.settings import Settings
from test_distributed import finish, schedule, start_worker

from webrace.delegation import Crawler, DelegationError, target_ip
from webrace.distributed.delegation import RedisDelegation
from webrace.distributed.registry import RoundRegistry

RIR = """2|ripencc|20240101|3|19830101|20240101|+0100
ripencc|*|ipv4|*|3|summary
ripencc|CY|ipv4|194.42.0.0|768|20000101|allocated|org-ucy
ripencc|CY|ipv4|194.42.16.0|4096|20000101|allocated|org-ucy
ripencc|GR|ipv4|195.251.0.0|65536|19950101|allocated|org-grnet
"""
LATENCY = "crawler,ip,ms\ncy,194.42.1.5,3\ngr,194.42.1.5,40\ncy,195.251.9.9,38\ngr,195.251.9.9,5\n" \
          "cy,194.42.16.7,4\ngr,194.42.16.7,41\n"
HOSTS = {"cy.test": "194.42.1.5", "gr.test": "195.251.9.9", "cy2.test": "194.42.16.7"}
WORKERS = {"cy": "194.42.0.10", "gr": "195.251.1.10"}


def delegation_settings(tmp_path, worker: str, url: str, prefix: str, rir: str = RIR, latency: str = LATENCY) -> dict:
    (tmp_path / "ripe.txt").write_text(rir)
    (tmp_path / "latency.csv").write_text(latency)
    return {"REDIS_URL": url, "WEBRACE_REDIS_PREFIX": prefix, "WEBRACE_DELEGATION": True,
            "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects"),
            "WEBRACE_WORKER_ID": worker, "WEBRACE_WORKER_IP": WORKERS[worker],
            "WEBRACE_DELEGATION_RIR": [str(tmp_path / "ripe.txt")],
            "WEBRACE_DELEGATION_LATENCY": str(tmp_path / "latency.csv"), "WEBRACE_DELEGATION_HOSTS": HOSTS}


def delegation(tmp_path, worker: str, url: str, prefix: str, **files: str) -> RedisDelegation:
    settings = Settings({"WEBRACE_LEASE_TIMEOUT": 300.0, "WEBRACE_DELEGATION_THRESHOLD_MS": 50.0,
                         **delegation_settings(tmp_path, worker, url, prefix, **files)})
    found = RedisDelegation(redis.Redis.from_url(url), prefix, settings)
    found.register()
    return found


def test_per_worker_queues_receive_the_pages_of_their_hosts(tmp_path, redis_url, redis_prefix):
    cy, gr = delegation(tmp_path, "cy", redis_url, redis_prefix), delegation(tmp_path, "gr", redis_url, redis_prefix)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    frontier = RoundRegistry(client, redis_prefix, cy.route).frontier("r1")
    urls = ["http://cy.test/a", "http://gr.test/b", "http://cy2.test/c", "http://elsewhere.test/d"]
    frontier.offer_many("http://hub.test/", 1, [(url, {"u1": 1}) for url in urls])
    assert client.zrange(frontier.worker_queue("cy"), 0, -1) == ["http://cy.test/a", "http://cy2.test/c"]
    assert client.zrange(frontier.worker_queue("gr"), 0, -1) == ["http://gr.test/b"]
    assert client.zrange(frontier.keys["queue"], 0, -1) == ["http://elsewhere.test/d"]  # host not resolved
    assert frontier.pending() == 4
    assert client.hget(f"{redis_prefix}delegation:subnets", "194.42.16.0/20") == "cy"  # decided once, shared
    assert gr.route(["http://cy2.test/other"]) == ["cy"]  # gr adopts cy's decision
    # leasing: a worker's own queue, then the shared one; never another live worker's
    gr_frontier = RoundRegistry(client, redis_prefix, gr.route).frontier("r1")
    assert gr_frontier.lease(60_000, "gr").url == "http://gr.test/b"
    assert gr_frontier.lease(60_000, "gr").url == "http://elsewhere.test/d"
    assert gr_frontier.lease(60_000, "gr") is None
    assert gr_frontier.lease(60_000, "gr", also=("cy",)).url == "http://cy.test/a"  # cy stopped: taken over


def test_two_workers_each_crawl_the_hosts_delegated_to_them(site, tmp_path, redis_url, redis_prefix):
    site.html("/", [site.url(f"/c{i}", "cy.test") for i in range(4)] + [site.url(f"/g{i}", "gr.test")
                                                                        for i in range(4)], host="hub.test")
    for i in range(4):
        site.html(f"/c{i}", [], host="cy.test")
        site.html(f"/g{i}", [], host="gr.test")
    env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
           "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects")}
    scheduler = Project(tmp_path / "scheduler")
    (tmp_path / "scheduler").mkdir()
    scheduler.env.update(env)
    scheduler.add_urds(urd("u1", "alice", site.url("/", "hub.test"), depth=1, scope="any"))
    assert "opened" in schedule(scheduler)
    runs = {}
    for worker in WORKERS:
        (tmp_path / worker).mkdir()
        project = Project(tmp_path / worker)
        project.env.update(env)
        settings = {k: (json.dumps(v) if isinstance(v, dict) else ",".join(v) if isinstance(v, list) else v)
                    for k, v in delegation_settings(tmp_path, worker, redis_url, redis_prefix).items()
                    if k not in ("REDIS_URL", "WEBRACE_REDIS_PREFIX")}
        runs[worker] = (project, *start_worker(project, **settings))
    done = {worker: finish(project, proc, out) for worker, (project, proc, out) in runs.items()}
    for run in done.values():
        assert run.returncode == 0, run.stderr[-3000:]
        assert "'delegation/over_capacity': 0" in run.stderr  # IPMicra's counts are in the crawl's stats
    assert any("'delegation/probes'" in run.stderr for run in done.values())
    fetched = {worker: {item["url"] for item in run.pages} for worker, run in done.items()}
    assert {u for u in fetched["cy"] if "gr.test" in u} == set() and len([u for u in fetched["cy"]
                                                                          if "cy.test" in u]) == 4
    assert {u for u in fetched["gr"] if "cy.test" in u} == set() and len([u for u in fetched["gr"]
                                                                          if "gr.test" in u]) == 4


def test_a_worker_without_its_address_or_hierarchy_is_refused_before_any_request(tmp_path, redis_url, redis_prefix):
    project = Project(tmp_path)
    project.env.update({"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix})
    done = project.scrapy("crawl", "urd", "-s", "WEBRACE_DELEGATION=True", "-s", "WEBRACE_DELEGATION_RIR=ripe.txt")
    assert done.returncode == 1 and "WEBRACE_WORKER_IP" in done.stderr and "Traceback" not in done.stderr
    done = project.scrapy("crawl", "urd", "-s", "WEBRACE_DELEGATION=True", "-s", "WEBRACE_WORKER_IP=10.0.0.1",
                          "-s", "WEBRACE_DELEGATION_RIR=missing.txt")
    assert done.returncode == 1 and "missing.txt" in done.stderr and "Nothing was crawled" in done.stderr


def test_workers_measure_for_each_other_when_asked_through_redis(tmp_path, redis_url, redis_prefix):
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        measured = {}
        for worker in WORKERS:  # no latency table: probes are measured TCP connects
            shared = delegation_settings(tmp_path, worker, redis_url, redis_prefix)
            settings = Settings({"WEBRACE_LEASE_TIMEOUT": 300.0, "WEBRACE_DELEGATION_THRESHOLD_MS": 50.0,
                                 **{k: v for k, v in shared.items() if k != "WEBRACE_DELEGATION_LATENCY"}})
            measured[worker] = RedisDelegation(redis.Redis.from_url(redis_url), redis_prefix, settings)
            measured[worker].register()
        cy, gr = measured["cy"], measured["gr"]
        assert cy.undecided([f"http://127.0.0.1:{port}/a"]) == [("127.0.0.1", port)]
        fields = cy.ask([("127.0.0.1", port)])
        assert fields == ["gr|127.0.0.1"]
        assert gr.serve_probes() == 1 and gr.serve_probes() == 0  # answered once
        ms = cy.measured.probe("gr", "127.0.0.1")  # cy reads gr's measurement from Redis
        assert 0 <= ms < float("inf")
        assert cy.ask([("127.0.0.1", port)]) == []  # already measured: nobody asked again
    finally:
        listener.close()


def sharing(tmp_path, worker: str, url: str, prefix: str) -> RedisDelegation:
    """A worker over the test's RIR file and table, with a third block of org-ucy (194.42.32.0/20)."""
    return delegation(tmp_path, worker, url, prefix,
                      rir=RIR + "ripencc|CY|ipv4|194.42.32.0|4096|20000101|allocated|org-ucy\n",
                      latency=LATENCY + "cy,194.42.33.1,5\ngr,194.42.33.1,42\n")


def test_a_probe_one_worker_paid_for_serves_the_other_workers_decisions(tmp_path, redis_url, redis_prefix):
    cy, gr = sharing(tmp_path, "cy", redis_url, redis_prefix), sharing(tmp_path, "gr", redis_url, redis_prefix)
    assert cy.route(["http://cy2.test/c"]) == ["cy"]
    paid = cy.delegator.stats["delegation/probes"]
    assert paid > 0  # nothing was known of org-ucy's second block: cy's coordinator probed
    gr.route(["http://gr.test/b"])  # gr reads what cy paid for before it decides
    assert gr.shared.learned == paid and gr.shared.skipped == 0
    ucy = target_ip("194.42.16.7")
    assert {c: gr.delegator.knowledge.estimate(c, ucy).ms for c in ("cy", "gr")} == \
        {c: cy.delegator.knowledge.estimate(c, ucy).ms for c in ("cy", "gr")}
    # the organisation's third block, new to both: gr decides it from cy's probes, where a
    # worker that shares nothing (a prefix of its own) has to probe
    before = gr.delegator.stats["delegation/probes"]
    assert gr.route(["http://194.42.33.1/d"]) == ["cy"]
    assert gr.delegator.stats["delegation/probes"] == before
    alone = sharing(tmp_path, "gr", redis_url, f"{redis_prefix}alone:")
    alone.delegator.register(Crawler("cy", WORKERS["cy"]))
    assert alone.route(["http://194.42.33.1/d"]) == ["cy"] and alone.delegator.stats["delegation/probes"] > 0


def test_malformed_shared_probe_results_are_counted_and_skipped(tmp_path, redis_url, redis_prefix):
    cy = delegation(tmp_path, "cy", redis_url, redis_prefix)
    client = redis.Redis.from_url(redis_url)
    key = f"{redis_prefix}delegation:knowledge"
    client.xadd(key, {"by": "gr", "crawler": "gr", "ip": "not-an-ip", "ms": "3"})
    client.xadd(key, {"by": "gr", "crawler": "gr", "ip": "194.42.1.5", "ms": "nan"})
    client.xadd(key, {"by": "gr", "ip": "194.42.1.5", "ms": "3"})
    client.xadd(key, {"by": "gr", "crawler": "gr", "ip": "194.42.1.5", "ms": "40"})
    assert cy.shared.pull() == 1 and cy.shared.skipped == 3
    assert cy.delegator.knowledge.estimate("gr", target_ip("194.42.1.5")).ms == pytest.approx(40)
    assert cy.shared.pull() == 0  # read once


def bounded(tmp_path, worker: str, url: str, prefix: str, capacity: int, hosts: list[str]) -> RedisDelegation:
    """A worker of ``capacity`` addresses, over a table where every one of ``hosts`` is 3 ms from cy, 40 from gr."""
    latency = LATENCY + "".join(f"cy,{ip},3\ngr,{ip},40\n" for ip in hosts)
    settings = Settings({"WEBRACE_LEASE_TIMEOUT": 300.0, "WEBRACE_DELEGATION_THRESHOLD_MS": 50.0,
                         "WEBRACE_WORKER_CAPACITY": capacity,
                         **delegation_settings(tmp_path, worker, url, prefix, latency=latency)})
    found = RedisDelegation(redis.Redis.from_url(url), prefix, settings)
    found.register()
    return found


def test_no_worker_is_given_more_addresses_than_its_capacity_whichever_coordinator_decides(
        tmp_path, redis_url, redis_prefix):
    # eight addresses of org-ucy, all nearest to cy; each worker takes 3 addresses at most
    hosts = [f"194.42.1.{n}" for n in range(1, 9)]
    cy, gr = (bounded(tmp_path, name, redis_url, redis_prefix, 3, hosts) for name in ("cy", "gr"))
    cy.sync_workers(force=True)
    routes = {}
    for n, ip in enumerate(hosts):  # the two coordinators take turns, each with its own delegator
        coordinator = (cy, gr)[n % 2]
        routes[ip] = coordinator.route([f"http://{ip}/a", f"http://{ip}/b"])
        assert routes[ip][0] == routes[ip][1]  # one address, one worker
    given = [route[0] for route in routes.values()]
    assert given.count("cy") == 3 and given.count("gr") == 3 and given.count(None) == 2
    assert routes[hosts[0]][0] == "cy"  # the nearest while it had room
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    assert client.hgetall(f"{redis_prefix}delegation:load") == {"cy": "3", "gr": "3"}
    assert cy.over_capacity + gr.over_capacity == 2
    # an address given before goes to the same worker again and counts once
    first_gr = next(ip for ip, route in routes.items() if route[0] == "gr")
    assert cy.route([f"http://{first_gr}/c"]) == ["gr"]
    assert client.hgetall(f"{redis_prefix}delegation:load") == {"cy": "3", "gr": "3"}


def test_an_address_whose_subnet_was_re_delegated_follows_it_and_the_loads_follow(tmp_path, redis_url, redis_prefix):
    cy, gr = delegation(tmp_path, "cy", redis_url, redis_prefix), delegation(tmp_path, "gr", redis_url, redis_prefix)
    url = "http://cy.test/a"
    assert cy.route([url]) == ["cy"]
    for ms in (10.0, 10.0, 900.0, 900.0):  # cy's fetches there got slow: the subnet goes to gr
        cy.report(url, ms)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    assert client.hget(f"{redis_prefix}delegation:subnets", "194.42.0.0/23") == "gr"
    assert gr.route([url]) == ["gr"]
    assert client.hget(f"{redis_prefix}delegation:addresses", "194.42.1.5") == "gr"
    assert client.hgetall(f"{redis_prefix}delegation:load") == {"cy": "0", "gr": "1"}


def test_coordinators_deciding_at_once_never_overfill_a_worker(tmp_path, redis_url, redis_prefix):
    import threading

    hosts = [f"194.42.1.{n}" for n in range(1, 41)]
    # two coordinators a worker
    coordinators = [bounded(tmp_path, name, redis_url, redis_prefix, 15, hosts) for name in ("cy", "gr", "cy", "gr")]
    for coordinator in coordinators:
        coordinator.sync_workers(force=True)
    start = threading.Barrier(len(coordinators))
    routes: list[list[str | None]] = [[] for _ in coordinators]

    def run(n: int) -> None:
        start.wait()
        for ip in hosts[n::2]:  # every address is routed by two coordinators at about the same time
            routes[n] += coordinators[n].route([f"http://{ip}/"])

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(coordinators))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    given = client.hgetall(f"{redis_prefix}delegation:addresses")
    assert sorted(given.values()).count("cy") == 15 and sorted(given.values()).count("gr") == 15
    assert client.hgetall(f"{redis_prefix}delegation:load") == {"cy": "15", "gr": "15"}
    for n, ip_routes in enumerate(routes):  # each coordinator sent each address where it was given
        assert all(route == given.get(ip) for ip, route in zip(hosts[n::2], ip_routes, strict=True))


def test_a_malformed_worker_entry_or_capacity_is_refused_in_one_line_and_the_others_go_on(
        tmp_path, redis_url, redis_prefix, caplog):
    settings = Settings({"WEBRACE_LEASE_TIMEOUT": 300.0, "WEBRACE_WORKER_CAPACITY": "many",
                         **delegation_settings(tmp_path, "cy", redis_url, redis_prefix)})
    with pytest.raises(DelegationError, match="WEBRACE_WORKER_CAPACITY='many': a whole number"):
        RedisDelegation(redis.Redis.from_url(redis_url), redis_prefix, settings)
    client = redis.Redis.from_url(redis_url)
    workers = f"{redis_prefix}delegation:workers"
    client.hset(workers, "x", "not json")
    client.hset(workers, "y", json.dumps({"ip": "195.251.2.2", "capacity": "3", "seen": 1}))
    client.hset(workers, "z", json.dumps({"ip": "195.251.2.3", "capacity": 2.5, "seen": 1}))
    cy = delegation(tmp_path, "cy", redis_url, redis_prefix)
    gr = delegation(tmp_path, "gr", redis_url, redis_prefix)
    assert cy.route(["http://gr.test/b"]) == ["gr"]  # cy learns gr as it routes
    assert set(cy.delegator.crawlers) == {"cy", "gr"} and set(gr.delegator.crawlers) == {"cy", "gr"}
    assert sum("cannot take part in delegation" in r.message for r in caplog.records) == 6  # once a worker each


def test_a_link_to_an_address_with_a_scope_id_is_routed_with_its_page_and_breaks_nothing(
        tmp_path, redis_url, redis_prefix):
    cy = delegation(tmp_path, "cy", redis_url, redis_prefix)
    # a hostile page links to a link-local zone: no registry allocates it, no table measures it
    routes = cy.route(["http://cy.test/a", "http://[fe80::1%25eth0]/x"])
    assert routes[0] == "cy" and routes[1] in ("cy", "gr", None)  # a worker, or the shared queue


@pytest.mark.parametrize("reactor", ["twisted.internet.asyncioreactor.AsyncioSelectorReactor",
                                     "twisted.internet.selectreactor.SelectReactor"])
def test_a_worker_without_a_latency_table_measures_and_crawls_every_page(site, tmp_path, redis_url, redis_prefix,
                                                                         reactor):
    """Issue 44: the README's own example (no ``WEBRACE_DELEGATION_LATENCY``) raised "Task got
    bad yield: <Deferred>" on every page with links under the asyncio reactor, emitted no item
    and exited 0. Its links' hosts are resolved (``*.test``) or literal, and measured by TCP
    connects to this site (127.0.0.1 is in the hierarchy, so there is a subnet to decide);
    under Scrapy's default reactor (asyncio's) and a Twisted one."""
    links = [site.url(f"/n{i}", f"n{i}.test") for i in range(3)] + [site.url("/literal")]
    site.html("/", links)
    for i in range(3):
        site.html(f"/n{i}", [])
    site.html("/literal", [])
    env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
           "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects")}
    scheduler = Project(tmp_path / "scheduler")
    (tmp_path / "scheduler").mkdir()
    scheduler.env.update(env)
    scheduler.add_urds(urd("u1", "alice", site.url("/"), depth=1, scope="any"))
    assert "opened" in schedule(scheduler)
    (tmp_path / "ripe.txt").write_text(RIR + "ripencc|ZZ|ipv4|127.0.0.0|16777216|20000101|allocated|org-loop\n")
    (tmp_path / "worker").mkdir()
    worker = Project(tmp_path / "worker")
    worker.env.update(env)
    run = finish(worker, *start_worker(worker, TWISTED_REACTOR=reactor, WEBRACE_DELEGATION=True,
                                       WEBRACE_WORKER_ID="cy", WEBRACE_WORKER_IP=WORKERS["cy"],
                                       WEBRACE_DELEGATION_RIR=str(tmp_path / "ripe.txt")))
    assert "Traceback" not in run.stderr and "bad yield" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(item["url"] for item in run.pages) == sorted([site.url("/"), *links])
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    assert float(client.hget(f"{redis_prefix}delegation:rtt", "cy|127.0.0.1")) < float("inf")  # measured
    assert "done" in schedule(scheduler)
