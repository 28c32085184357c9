"""One fetch serves everyone who wants the page (issue 41): a new version fetched in one
owner's round is judged for every URD that reached the page in earlier rounds and evaluated
for every sentinel on it, due or not, so the next round's 304 loses nothing; a page a round
confirmed within a URD's timing serves that URD's round without a request.

Real `scrapy crawl urd` runs against a server on 127.0.0.1 that answers conditional requests.
The same middlewares and round engine run in the distributed mode; its stores' share of the
contract (``MetaInfo.wanted``/``checked`` in Redis, ``SentinelStore.watching``) is tested in
test_backends.py and test_sentinels_distributed.py.
"""

from __future__ import annotations

from dataclasses import replace

from conftest import urd

from webrace.backends import open_object_cache, open_sentinel_store, open_urd_store
from webrace.rounds.groups import urd_reach_key
from webrace.urd import now_millis

MINUTE = 60_000


def site_of_hubs(site) -> None:
    """``/`` links two hubs; each hub links two of three pages; every page says "apple"."""
    site.validators = True
    site.html("/", ["/hub1", "/hub2"], text="apple index")
    site.html("/hub1", ["/p1", "/p2"], text="apple hub one")
    site.html("/hub2", ["/p2", "/p3"], text="apple hub two")
    for n in (1, 2, 3):
        site.html(f"/p{n}", [], text=f"apple page {n}")


def overlapping_owners(project, site) -> None:
    project.add_urds(
        urd("whole", "wendy", site.url("/"), depth=2, keywords={"apple": 1}),
        urd("h1", "hana", site.url("/hub1"), depth=1, keywords={"zebra": 1}),
        urd("h2", "hugo", site.url("/hub2"), depth=1, keywords={"zebra": 1}),
    )


def watched_not_due(project, url: str) -> None:
    """sam's content sentinel on ``url``, checked just now: due in an hour."""
    done = project.scrapy("sentinel", "add", "--owner", "sam", "--url", url, "--type", "content")
    assert done.returncode == 0, done.stderr
    with open_sentinel_store(project.settings()) as store:
        store.checked([s.id for s, _, _ in store.all()], now_millis())


def only_due(project, urd_id: str) -> None:
    with open_urd_store(project.settings()) as store:
        store.make_due([urd_id], now_millis())


def acis_for(run, owner: str) -> set[str]:
    return {a["uri"] for a in run.acis if a["owner"] == owner}


def test_a_change_fetched_in_another_owners_round_is_judged_for_the_owners_who_wanted_it(site, project):
    site_of_hubs(site)
    overlapping_owners(project, site)
    first = project.crawl()
    assert acis_for(first, "wendy") == {site.url(p) for p in ("/", "/hub1", "/hub2", "/p1", "/p2", "/p3")}
    # /p2 changes; only hana's URD is due: the new version is fetched in her round, where
    # nobody's keywords match it
    site.html("/p2", [], text="apple page 2, now with a banana")
    only_due(project, "h1")
    second = project.crawl()
    page = second.by_url[site.url("/p2")]
    assert page["new_version"] and page["urd_ids"] == ["h1"]
    assert acis_for(second, "wendy") == {site.url("/p2")}  # judged for the whole-site owner too
    assert page["kept"] and page["relevant_to"] == ["wendy"]  # so its body is not dropped
    assert second.stat("webrace/judged_wanted") == 2  # wendy's and hugo's URDs reached it before
    # wendy's own round then gets a 304: the change was hers already
    only_due(project, "whole")
    third = project.crawl()
    assert third.by_url[site.url("/p2")]["not_modified"] and acis_for(third, "wendy") == set()
    assert site.count("/p2") == 3


def test_urds_merged_into_a_page_after_its_fetch_are_added_to_its_record(site, project):
    """wendy's round reaches the hubs after they were fetched as hana's and hugo's start pages
    (the items wait for her): her URD is added to their records when they are released."""
    site_of_hubs(site)
    overlapping_owners(project, site)
    run = project.crawl()
    assert "Could not record" not in run.stderr
    with open_urd_store(project.settings()) as store:
        keys = {u.id: urd_reach_key(u) for u in store.all()}
    reached = {"/": {"whole"}, "/hub1": {"whole", "h1"}, "/hub2": {"whole", "h2"}, "/p1": {"whole", "h1"},
               "/p2": {"whole", "h1", "h2"}, "/p3": {"whole", "h2"}}
    with open_object_cache(project.settings()) as cache:
        assert {path: set(cache.lookup(site.url(path)).wanted) for path in reached} == \
            {path: {keys[i] for i in ids} for path, ids in reached.items()}


def test_a_sentinel_not_due_is_told_of_a_change_another_round_fetched(site, project):
    site_of_hubs(site)
    overlapping_owners(project, site)
    project.crawl()
    watched_not_due(project, site.url("/p2"))
    site.html("/p2", [], text="apple page 2, rewritten")
    only_due(project, "h2")
    run = project.crawl()
    (note,) = [i for i in run.items if "sentinel" in i]
    assert note["owner"] == "sam" and note["url"] == site.url("/p2")
    assert run.stat("sentinels/not_due") == 1 and run.stat("sentinels/fired") == 1


def test_a_page_a_round_confirmed_within_a_urds_timing_serves_its_round_without_a_request(site, project):
    site.validators = True
    site.html("/", ["/a.html"], text="index")
    site.html("/a.html", [], text="leaf")
    project.add_urds(urd("a", "ann", site.url("/"), depth=1, timing=60 * MINUTE),
                     urd("b", "bob", site.url("/a.html"), timing=10 * MINUTE))
    project.crawl()
    assert site.count("/a.html") == 1  # one download for both URDs

    def naturally_due(urd_id: str) -> None:  # its timing passed since its last check
        with open_urd_store(project.settings()) as store:
            store.mark_checked([urd_id], now_millis() - 11 * MINUTE)

    naturally_due("b")
    fresh = project.crawl()
    assert site.count("/a.html") == 1  # the round that fetched it opened under 10 minutes ago
    page = fresh.by_url[site.url("/a.html")]
    assert page["not_modified"] and page["owners"] == ["bob"] and not page["new_version"]
    assert fresh.stat("recrawl/fresh") == 1 and fresh.stat("webrace/served_fresh") == 1
    assert "fresh = 1" in fresh.stderr  # the summary says so
    # the record grows older than bob's timing: his next round asks the server (a 304)
    with open_object_cache(project.settings()) as cache:
        meta = cache.lookup(site.url("/a.html"))
        cache.index.put(replace(meta, checked=meta.checked - 11 * MINUTE))
    naturally_due("b")
    stale = project.crawl()
    assert site.count("/a.html") == 2 and site.statuses()["/a.html"] == 304
    assert stale.stat("recrawl/fresh") == 0 and stale.stat("recrawl/not_modified") == 1


def test_a_urd_a_person_asks_for_now_is_fetched_however_fresh_its_pages_are(site, project):
    site.validators = True
    site.html("/", [], text="index")
    project.add_urds(urd("a", "ann", site.url("/"), timing=60 * MINUTE))
    project.crawl()
    again = project.crawl("-a", "urd=a")
    assert site.count("/") == 2 and again.stat("recrawl/fresh") == 0


def test_in_the_distributed_mode_a_change_another_round_fetched_reaches_the_owner_and_sentinel(
        site, tmp_path, redis_url, redis_prefix):
    from test_distributed import finish, schedule, start_worker, worker_project

    redis_env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
                 "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects")}
    site_of_hubs(site)
    scheduler = worker_project(tmp_path, "scheduler", redis_env)
    overlapping_owners(scheduler, site)
    schedule(scheduler)
    first = worker_project(tmp_path, "first", redis_env)
    proc, out = start_worker(first)
    assert finish(first, proc, out).returncode == 0
    schedule(scheduler)  # closes the first round
    watched_not_due(scheduler, site.url("/p2"))
    site.html("/p2", [], text="apple page 2, now with a banana")
    only_due(scheduler, "h1")
    schedule(scheduler)  # a round of hana's URD only
    second = worker_project(tmp_path, "second", redis_env)
    proc, out = start_worker(second)
    run = finish(second, proc, out)
    assert run.returncode == 0, run.stderr[-2000:]
    page = run.by_url[site.url("/p2")]
    assert page["new_version"] and page["urd_ids"] == ["h1"]
    assert page["kept"]
    assert acis_for(run, "wendy") == {site.url("/p2")}
    assert [(n["owner"], n["url"]) for n in run.items if "sentinel" in n] == [("sam", site.url("/p2"))]


def test_a_urd_that_reaches_a_page_after_its_fetch_is_told_of_its_next_change(site, project):
    """Found by bench/chaos.py (issue 44): the URDs merged into a page after its fetch are added
    to its record off the reactor; under the asyncio reactor that call failed ("await wasn't
    used with future", a warning) and the next change went to the first URD's owner only."""
    site.validators = True
    site.html("/", ["/a.html"], text="apple index")
    site.html("/a.html", ["/y.html"], text="apple a")
    site.html("/b.html", ["/y.html"], text="zebra b")
    site.html("/y.html", [], text="apple y")
    site.delays["/b.html"] = 1.0  # /y.html is fetched for wendy before bob's start page answers
    project.add_urds(urd("whole", "wendy", site.url("/"), depth=2, keywords={"apple": 1}),
                     urd("b", "bob", site.url("/b.html"), depth=1, keywords={"banana": 1}))
    first = project.crawl()
    assert first.by_url[site.url("/y.html")]["owners"] == ["bob", "wendy"]  # bob's URD merged in after
    assert "Could not record" not in first.stderr
    site.html("/y.html", [], text="apple y, now with a banana")
    only_due(project, "whole")
    second = project.crawl()
    assert second.by_url[site.url("/y.html")]["urd_ids"] == ["whole"]
    assert acis_for(second, "bob") == {site.url("/y.html")}


def test_a_urd_added_after_another_owner_crawled_its_pages_is_told_what_they_hold_now(site, project):
    """Found by bench/chaos.py (issue 44): a version stored in another owner's round (there, in a
    sentinel's, after Redis came back empty and forgot which URDs wanted the page) was never
    judged for a URD whose own round then got the same body, a 304 or a fresh record: that owner
    never heard of the change. A URD the page's record does not know is judged for the version
    it holds, once; the owners who had it are not told again."""
    site_of_hubs(site)
    project.add_urds(urd("whole", "wendy", site.url("/"), depth=2, keywords={"apple": 1}))
    first = project.crawl()
    assert acis_for(first, "wendy") == {site.url(p) for p in ("/", "/hub1", "/hub2", "/p1", "/p2", "/p3")}
    project.add_urds(urd("late", "bob", site.url("/hub1"), depth=1, keywords={"apple": 1}))
    only_due(project, "late")
    second = project.crawl()
    assert not any(item["new_version"] for item in second.items if "new_version" in item)
    assert acis_for(second, "bob") == {site.url(p) for p in ("/hub1", "/p1", "/p2")}
    assert acis_for(second, "wendy") == set() and second.stat("webrace/judged_newcomers") == 3
    only_due(project, "late")
    third = project.crawl()  # bob's URD is in the pages' records now: nothing new, nothing again
    assert acis_for(third, "bob") == set() and third.stat("webrace/judged_newcomers") == 0
