"""Sentinels in `scrapy crawl urd` and `scrapy sentinel ...`."""

from __future__ import annotations

import json

from conftest import urd

from webrace.backends import open_sentinel_store
from webrace.backends.sqlite import SqliteSentinelStore
from webrace.records.sentinel import make
from webrace.settings import WEBRACE_SENTINEL_TICK as TICK
from webrace.urd import now_millis

PAGE = """<html><body><div id="news"><p>Old headline</p><a href="/s1">story</a></div>
<div id="clock"><p>Updated 10:01</p></div></body></html>"""


def sentinel(project, *args) -> list[str]:
    done = project.scrapy("sentinel", "add", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def notifications(project, owner):
    done = project.scrapy("sentinel", "notifications", "--owner", owner, "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def again(project):
    """Every sentinel and URD due now, as `scrapy sentinel due --all` and `scrapy urd due --all`
    make them (in this process; the `sentinel due` command itself is run below, in
    test_a_sentinel_added_on_a_stored_page_reports_the_first_change)."""
    with open_sentinel_store(project.settings()) as store:
        store.make_due(None, now_millis())
    project.make_due()


def test_many_sentinels_on_one_url_share_one_fetch_and_notify_their_owners(site, project):
    site.validators = True
    site.add("/page", PAGE)
    url = site.url("/page")
    # thirty owners' sentinels straight into the store (one `scrapy sentinel add` each would
    # spend half a minute starting Python); two more through the command
    project.data.mkdir(parents=True, exist_ok=True)
    with SqliteSentinelStore(project.data / "sentinels.sqlite") as store:
        ids = store.add([make(f"user{n}", url, "content", "css:#news", tick_ms=int(TICK * 1000), now_ms=now_millis())
                         for n in range(30)])
    ids += sentinel(project, "--owner", "alice", "--url", url, "--type", "links", "--on", "added")
    ids += sentinel(project, "--owner", "bob", "--url", url, "--type", "any", "--ignore", r"Updated \d\d:\d\d")
    project.add_urds(urd("u", "carol", url))  # a URD on the same page: still one fetch
    first = project.crawl()
    assert first.returncode == 0, first.stderr[-3000:]
    assert site.count("/page") == 1  # 32 sentinels and a URD, one request
    assert first.stat("sentinels/due") == 32 and not [i for i in first.items if "sentinel" in i]
    # a change inside #news: every content sentinel there and bob fire; alice's links only on a new link
    site.add("/page", PAGE.replace("Old headline", "New headline").replace("10:01", "10:02"))
    again(project)
    second = project.crawl()
    assert site.count("/page") == 2
    notes = [i for i in second.items if "sentinel" in i]
    assert sorted(n["owner"] for n in notes) == sorted([f"user{n}" for n in range(30)] + ["bob"])
    assert second.stat("sentinels/groups") == 1  # one encode, one previous digest
    (mine,) = notifications(project, "user7")
    assert mine["type"] == "content" and mine["url"] == url and mine["changes"] == {
        "added": ["New headline"], "removed": ["Old headline"]}
    assert mine["before"] == "Old headline" and mine["after"] == "New headline"
    # only the clock changes: bob ignores it, nobody is told
    site.add("/page", PAGE.replace("Old headline", "New headline").replace("10:01", "10:03"))
    again(project)
    third = project.crawl()
    assert [i for i in third.items if "sentinel" in i] == []
    # a new link without text: alice (links) and bob (any: the shape changed); no text changed
    site.add("/page", PAGE.replace("Old headline", "New headline").replace(
        '<a href="/s1">story</a>', '<a href="/s1">story</a><a href="/s2"></a>'))
    again(project)
    fourth = project.crawl()
    assert {(n["owner"], n["type"]) for n in fourth.items if "sentinel" in n} == {("alice", "links"), ("bob", "any")}
    assert notifications(project, "alice")[0]["changes"] == {"added": ["/s2"]}


def test_an_unchanged_page_is_a_304_and_nobody_is_told(site, project):
    site.validators = True
    site.add("/page", PAGE)
    sentinel(project, "--owner", "alice", "--url", site.url("/page"), "--type", "any")
    project.crawl()
    again(project)
    second = project.crawl()
    assert site.statuses()["/page"] == 304 and [i for i in second.items if "sentinel" in i] == []
    listed = [json.loads(line) for line in project.scrapy("sentinel", "list", "--format", "jsonl").stdout.splitlines()]
    assert listed[0]["next_due"] > 0 and listed[0]["seen"]  # checked; compares against the first version


def test_sentinels_are_not_due_again_before_their_interval(site, project):
    site.add("/page", PAGE)
    sentinel(project, "--owner", "alice", "--url", site.url("/page"), "--every", "1h")
    project.crawl()
    project.crawl()
    assert site.count("/page") == 1


def test_add_checks_everything_and_takes_thousands_of_urls_in_one_call(site, project):
    bad = project.scrapy("sentinel", "add", "--owner", "a", "--url", site.url("/"), "--type", "regex",
                         "--pattern", "(unclosed")
    assert bad.returncode == 1 and "not a valid regular expression" in bad.stderr and "No sentinel" in bad.stderr
    bad_where = project.scrapy("sentinel", "add", "--owner", "a", "--url", site.url("/"), "--where", "css:##")
    assert bad_where.returncode == 1 and "not a CSS selector" in bad_where.stderr
    urls = project.write("urls.txt", "# watched\n" + "\n".join(site.url(f"/p{n}") for n in range(2000)))
    ids = sentinel(project, "--owner", "a", "--urls", str(urls), "--type", "content", "--every", "90s")
    assert len(set(ids)) == 2000
    listed = project.scrapy("sentinel", "list", "--format", "jsonl").stdout.splitlines()
    assert len(listed) == 2000 and json.loads(listed[0])["every"] == 120_000  # rounded up to the 60 s tick
    broken = project.write("broken.txt", "http://ok.test/\nnot a url\n")
    refused = project.scrapy("sentinel", "add", "--owner", "a", "--urls", str(broken))
    assert refused.returncode == 1 and "broken.txt:2" in refused.stderr
    assert project.scrapy("sentinel", "remove", ids[0]).stdout.startswith("Removed 1")


def test_a_location_that_matches_nothing_is_reported_when_added(site, project):
    site.add("/page", PAGE)
    project.add_urds(urd("u", "carol", site.url("/page")))
    project.crawl()
    added = project.scrapy("sentinel", "add", "--owner", "a", "--url", site.url("/page"), "--where", "css:#missing")
    assert added.returncode == 0 and "matches nothing on the stored version" in added.stderr


def test_a_sentinel_added_on_a_stored_page_reports_the_first_change(site, project):
    """Its baseline is the newest stored version at `sentinel add`: a 304 before the change
    leaves it, and the first new version is compared against it."""
    site.validators = True
    site.add("/page", PAGE)
    url = site.url("/page")
    project.add_urds(urd("u", "carol", url))
    project.crawl()
    sentinel(project, "--owner", "alice", "--url", url, "--type", "content", "--where", "css:#news", "--every", "1h")
    listed = json.loads(project.scrapy("sentinel", "list", "--format", "jsonl").stdout)
    assert listed["seen"] and listed["next_due"] <= listed["created"] + 60_000  # a baseline, and due now
    unchanged = project.crawl()
    assert site.statuses()["/page"] == 304 and [i for i in unchanged.items if "sentinel" in i] == []
    site.add("/page", PAGE.replace("Old headline", "New headline"))
    assert project.scrapy("sentinel", "due", "--all").returncode == 0
    changed = project.crawl()
    (note,) = [i for i in changed.items if "sentinel" in i]
    assert note["owner"] == "alice" and note["changes"] == {"added": ["New headline"], "removed": ["Old headline"]}


def test_add_right_after_a_crawl_then_a_change_is_reported_by_the_next_crawl(site, project):
    site.add("/page", PAGE)
    url = site.url("/page")
    project.add_urds(urd("u", "carol", url))
    project.crawl()
    sentinel(project, "--owner", "alice", "--url", url, "--type", "any")
    site.add("/page", PAGE.replace("Old headline", "New headline"))
    changed = project.crawl()
    assert [(i["owner"], i["type"]) for i in changed.items if "sentinel" in i] == [("alice", "any")]


def test_add_warns_when_the_stored_page_has_no_body_to_check_the_location_against(site, project):
    site.add("/page", PAGE)
    url = site.url("/page")
    project.add_urds(urd("u", "carol", url, keywords={"elephant": 1}))  # relevant to nobody: body dropped
    assert project.crawl().by_url[url]["kept"] is False
    added = project.scrapy("sentinel", "add", "--owner", "a", "--url", url, "--where", "css:#missing")
    assert added.returncode == 0, added.stderr
    (warning,) = [line for line in added.stderr.splitlines() if line.startswith("warning:")]
    assert f"the stored version of {url} has no body (dropped as relevant to no owner) to check css:#missing" \
           in warning
    assert "the next crawl fetches the page in full and takes the sentinel's baseline from it" in warning


def test_a_sentinel_on_a_page_whose_body_was_dropped_reports_the_first_change(site, project):
    """No stored body to take a baseline from at `add`: its page's next fetch is unconditional
    (a 200, not a 304), the baseline is taken from that unchanged page, and the first change
    after it is reported. Once it has a baseline, the page is asked conditionally again."""
    site.validators = True
    site.add("/page", PAGE)
    url = site.url("/page")
    project.add_urds(urd("u", "carol", url, keywords={"elephant": 1}))  # relevant to nobody: body dropped
    assert project.crawl().by_url[url]["kept"] is False
    sentinel(project, "--owner", "alice", "--url", url, "--type", "content", "--where", "css:#news")
    site.clear_hits()
    baseline = project.crawl()
    assert baseline.returncode == 0, baseline.stderr[-3000:]
    (fetch,) = [h for h in site.hits if h.path == "/page"]
    assert fetch.status == 200 and "If-None-Match" not in fetch.headers
    assert baseline.by_url[url]["new_version"] is False and baseline.by_url[url]["kept"] is False
    assert baseline.stat("sentinels/baselines") == 1
    listed = project.scrapy("sentinel", "list", "--format", "jsonl").stdout
    assert json.loads(listed)["seen"]
    site.add("/page", PAGE.replace("Old headline", "New headline"))
    again(project)
    site.clear_hits()
    changed = project.crawl()
    (fetch,) = [h for h in site.hits if h.path == "/page"]
    assert "If-None-Match" in fetch.headers  # conditional again
    (note,) = [i for i in changed.items if "sentinel" in i]
    assert note["owner"] == "alice" and note["changes"] == {"added": ["New headline"], "removed": ["Old headline"]}


def test_a_location_that_matches_nothing_on_the_first_fetch_is_reported_by_the_crawl(site, project):
    """A page with no stored body at `add` cannot be checked then: the crawl that takes the
    baseline says the location matches nothing."""
    site.validators = True
    site.add("/page", PAGE)
    url = site.url("/page")
    project.add_urds(urd("u", "carol", url, keywords={"elephant": 1}))
    project.crawl()
    (sentinel_id,) = sentinel(project, "--owner", "alice", "--url", url, "--where", "css:#missing")
    crawled = project.crawl()
    assert crawled.returncode == 0, crawled.stderr[-3000:]
    (warning,) = [line for line in crawled.stderr.splitlines() if "matches nothing" in line]
    assert "WARNING" in warning and f"sentinel {sentinel_id}" in warning
    assert f"css:#missing matches nothing on {url}" in warning


def test_a_sentinel_only_crawl_counts_its_full_fetches_as_first_or_unconditional(site, project):
    """Issue 44: a crawl of two sentinels (no URD) fetched both pages in full and reported
    ``first_fetch = 0``: a sentinel without a baseline asks unconditionally, and such requests
    were not counted at all. Pages never fetched are first fetches; a stored page fetched in
    full on purpose is ``unconditional``."""
    site.validators = True
    site.add("/a", PAGE)
    site.add("/b", PAGE)
    sentinel(project, "--owner", "alice", "--url", site.url("/a"))
    sentinel(project, "--owner", "alice", "--url", site.url("/b"))
    first = project.crawl()
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(site.paths()) == ["/a", "/b"] and set(site.statuses().values()) == {200}
    assert first.stat("recrawl/first_fetch") == 2 and first.stat("recrawl/unconditional") == 0
    assert "Re-crawl: first_fetch = 2 " in first.stderr
    # a page stored by a crawl before its sentinel, its body dropped (relevant to nobody): fetched
    # in full again, for the sentinel's baseline
    site.add("/c", PAGE)
    project.add_urds(urd("u", "bob", site.url("/c"), keywords={"elephant": 1}))
    assert project.crawl().by_url[site.url("/c")]["kept"] is False
    sentinel(project, "--owner", "alice", "--url", site.url("/c"))
    third = project.crawl()
    assert site.count("/c") == 2 and site.statuses()["/c"] == 200
    assert third.stat("recrawl/unconditional") == 1 and third.stat("recrawl/first_fetch") == 0
    assert "unconditional = 1" in third.stderr
