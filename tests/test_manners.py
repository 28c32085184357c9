"""Manners: robots.txt per RFC 9309 with no race, pacing by the server's cost, traps that
end, redirects judged like links. Crawls against servers on 127.0.0.1 that log every
request; what was fetched is read from the server's log."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import HANG, RESET, urd

from webrace.middlewares.robots import NONE, UNREACHABLE, classify
from webrace.pacing import Pacing
from webrace.traps import PathRules, QueryVariants

# -- pure parts, in-process ------------------------------------------------------------


def test_a_crawl_with_the_project_settings_opens_no_remote_code_endpoint():
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.exceptions import NotConfigured
    from scrapy.extensions.remote_control import RemoteControl
    from scrapy.settings import Settings

    settings = Settings()
    settings.setmodule("webrace.settings", priority="project")
    with pytest.raises(NotConfigured):
        RemoteControl(Crawler(Spider, settings))
    settings.set("REMOTE_CONTROL_ENABLED", True, priority="cmdline")  # a user may still turn it on
    settings.set("TWISTED_REACTOR_ENABLED", False, priority="cmdline")  # (asyncio alone: no reactor to ask)
    assert RemoteControl(Crawler(Spider, settings))._crawler is not None



@pytest.mark.parametrize(("status", "kind"), [
    (200, "parsed"), (204, "parsed"), (301, NONE), (304, NONE), (400, NONE), (401, NONE), (403, NONE),
    (404, NONE), (410, NONE), (429, UNREACHABLE), (500, UNREACHABLE), (503, UNREACHABLE), (599, UNREACHABLE),
])
def test_robots_status_classes_follow_rfc_9309(status, kind):
    assert classify(status) == kind


@pytest.mark.parametrize(("url", "trap"), [
    ("http://h/cal/x/x/x/", False),
    ("http://h/cal/x/x/x/x/", True),
    ("http://h/a/b/a/b/a/b/a/", True),  # not consecutive, still four times
    ("http://h/docs/3.11/library/os.path.html", False),
    ("http://h/2024/01/01/01/", False),  # "01" three times
    ("http://h/" + "/".join(f"s{i}" for i in range(20)), False),
    ("http://h/" + "/".join(f"s{i}" for i in range(21)), True),
    ("http://h/", False),
    ("http://h/x/x/x/x?q=1", True),
])
def test_path_rules_catch_repeated_segments_and_deep_paths(url, trap):
    assert (PathRules(3, 20).trap(url) is not None) is trap


def test_path_rules_switched_off_with_zero():
    assert PathRules(0, 0).trap("http://h/" + "x/" * 50) is None


def test_query_variants_admit_a_path_up_to_the_limit_then_only_known_queries():
    variants = QueryVariants(3)
    assert [variants.admit(f"http://h/list?page={n}") for n in range(5)] == [True, True, True, False, False]
    assert variants.admit("http://h/list?page=1")  # seen: still admitted
    assert variants.admit("http://h/list")  # no query at all
    assert variants.admit("http://h/other?page=9")  # another path has its own count
    assert variants.admit("http://other/list?page=9")  # another host too
    assert QueryVariants(0).admit("http://h/list?page=99")


def test_pacing_rests_a_factor_of_the_answer_time_within_bounds():
    pacing = Pacing(factor=2.0, min_delay=0.1, max_delay=5.0)
    assert pacing.pause(0.01) == 0.1  # floor
    assert pacing.pause(0.5) == 1.0
    assert pacing.pause(10) == 5.0  # ceiling
    assert pacing.answered("h", 0.5) == pytest.approx(1.5)  # start to start: the answer and the rest
    assert pacing.answered("h", 0.02) == pytest.approx(0.12)


def test_pacing_never_goes_below_crawl_delay_or_download_delay():
    pacing = Pacing(factor=2.0, floor=0.3)
    pacing.crawl_delays["slow"] = 4.0
    assert pacing.answered("slow", 0.01) == 4.0
    assert pacing.answered("other", 0.01) == 0.3
    assert pacing.hosts["slow"].largest == pytest.approx(3.99)  # the rest it really got


def test_pacing_share_of_the_server_is_bounded_whatever_the_order_of_answers():
    pacing = Pacing(factor=2.0)
    answers = [0.01, 1.0, 0.01, 1.0, 0.5, 0.02, 0.9] * 20
    gaps = [pacing.answered("h", t) for t in answers]
    assert sum(answers) / sum(gaps) <= 1 / 3 + 1e-9


# -- robots.txt in real crawls -----------------------------------------------------------


def test_many_due_start_pages_on_one_host_fetch_none_that_robots_txt_disallows(site, project):
    site.robots("User-agent: *\nDisallow: /private/\n")
    site.html("/open.html")
    urds = [urd("open", "ann", site.url("/open.html"))]
    for n in range(5):
        site.html(f"/private/p{n}.html")
        urds.append(urd(f"p{n}", f"owner{n}", site.url(f"/private/p{n}.html")))
    project.add_urds(*urds)
    run = project.crawl()
    assert site.paths() == ["/open.html"]
    assert [item["url"] for item in run.pages] == [site.url("/open.html")]
    assert run.summary["ignored_by_reason"] == {"robots": 5}
    assert run.stat("robots/disallowed") == 5 and run.stat("robots/allowed") == 1
    assert site.count("/robots.txt") == 0 and [h.path for h in site.hits].count("/robots.txt") == 1


def test_dynabot_seeds_on_one_host_fetch_none_that_robots_txt_disallows(site, project):
    site.robots("User-agent: *\nDisallow: /private/\n")
    seeds = [site.url(f"/private/form{n}.html") for n in range(5)] + [site.url("/about.html")]
    for n in range(5):
        site.html(f"/private/form{n}.html")
    site.html("/about.html")
    (project.root / "seeds.txt").write_text("\n".join(seeds) + "\n")
    scd = str(Path(__file__).resolve().parent.parent / "serviceclasses" / "nucleotide_blast.xml")
    done = project.scrapy("crawl", "dynabot", "-a", f"scd={scd}", "-a", "seeds=seeds.txt",
                          "-s", "WEBRACE_DELAY_FACTOR=0", "-s", "TELNETCONSOLE_ENABLED=False")
    assert done.returncode == 0, done.stderr[-2000:]
    assert site.paths() == ["/about.html"]
    assert "WebRACE crawl summary" not in done.stderr  # DynaBot logs its own tables, not a zero URD summary
    assert not (project.data / "last-crawl.json").exists()


def _robots_site(site, host: str, robots) -> None:
    site.routes[(host, "/robots.txt")] = robots
    site.html("/", ["/a.html", "/private/b.html"], host=host)
    site.html("/a.html", host=host)
    site.html("/private/b.html", host=host)


def test_robots_txt_answers_decide_per_host_as_rfc_9309_says(site, project):
    """One crawl, one host per kind of robots.txt answer."""
    text = "User-agent: *\nDisallow: /private/\n"
    plain = {"Content-Type": "text/plain"}
    hosts = {
        "ok.test": (200, plain, text.encode()),
        "err500.test": (500, plain, b"oops"),
        "err503.test": (503, plain, b"busy"),
        "slow429.test": (429, plain, b"slow down"),
        "gone.test": (404, plain, b"no such file"),
        "forbidden.test": (403, plain, b"no"),
        "reset.test": RESET,
        "hang.test": HANG,
        "moved.test": (301, {"Location": "/rules/robots.txt"}, b""),
        "loop.test": (302, {"Location": "/robots.txt"}, b""),
        # 600 KB of rules: a line past the first 500 KiB is not read
        "huge.test": (200, plain, ((text + "#" + "x" * 998 + "\n") * 600 + "Disallow: /a.html\n").encode()),
        "binary.test": (200, {"Content-Type": "application/octet-stream"}, bytes(range(256)) * 40),
    }
    for host, robots in hosts.items():
        _robots_site(site, host, robots)
    site.add("/rules/robots.txt", text, content_type="text/plain", host="moved.test")
    project.add_urds(*[urd(h.split(".")[0], "ann", site.url("/", host=h), depth=1) for h in hosts])
    run = project.crawl(WEBRACE_ROBOTS_TIMEOUT=2)
    fetched = {h: set(site.paths(h)) for h in hosts}
    both, open_only = {"/", "/a.html"}, {"/", "/a.html", "/private/b.html"}
    assert fetched["ok.test"] == both
    for host in ("err500.test", "err503.test", "slow429.test", "reset.test", "hang.test"):
        assert fetched[host] == set(), host  # complete disallow while the server errs
    assert fetched["gone.test"] == fetched["forbidden.test"] == open_only  # no rules
    assert fetched["moved.test"] == both | {"/rules/robots.txt"}  # the redirect's target is robots.txt
    assert fetched["loop.test"] == open_only  # over five hops: unavailable
    assert fetched["huge.test"] == both  # the first 500 KiB are the rules; the line after them is not
    assert fetched["binary.test"] == open_only
    assert [h.path for h in site.hits if h.host == "loop.test"].count("/robots.txt") == 6
    # robots.txt answered 5xx or 429: the pages are ignored; it could not be had at all: they failed as it did
    assert run.summary["ignored_by_reason"]["robots_unreachable"] == 3
    assert run.summary["failed_by_reason"] == {"connection": 1, "timeout": 1}
    assert run.stat("robots/unreachable") == 5
    unreachable = {k.split("//")[1].split(":")[0] for k in run.summary["stats"]
                   if k.startswith("robots/unreachable_origin/")}
    assert unreachable == {"err500.test", "err503.test", "slow429.test", "reset.test", "hang.test"}
    assert "robots.txt unreachable" in run.stderr


def test_unreachable_robots_txt_is_asked_again_next_round(site, project):
    answers = iter([(503, {"Content-Type": "text/plain"}, b"busy")] * 2)  # robots.txt is retried once
    site.routes[(None, "/robots.txt")] = lambda: next(answers, (200, {"Content-Type": "text/plain"}, b""))
    site.html("/")
    project.add_urds(urd("u", "ann", site.url("/"), timing=200))
    run = project.crawl(WEBRACE_CONTINUOUS=True, CLOSESPIDER_ITEMCOUNT=1)
    assert [h.path for h in site.hits][:4] == ["/robots.txt", "/robots.txt", "/robots.txt", "/"]
    assert run.stat("robots/unreachable") == 1 and run.stat("webrace/rounds") >= 2


def test_crawl_delay_of_zero_negative_or_junk_is_no_delay_and_enormous_skips_the_host(site, project):
    for host, delay in (("zero.test", "0"), ("neg.test", "-5"), ("junk.test", "soon"), ("huge.test", "1e9")):
        robots = f"User-agent: *\nCrawl-delay: {delay}\n".encode()
        _robots_site(site, host, (200, {"Content-Type": "text/plain"}, robots))
    project.add_urds(*[urd(h.split(".")[0], "ann", site.url("/", host=h), depth=1)
                       for h in ("zero.test", "neg.test", "junk.test", "huge.test")])
    run = project.crawl()
    for host in ("zero.test", "neg.test", "junk.test"):
        assert len(site.paths(host)) == 3, host
        assert run.stat(f"webrace/crawl_delay/{host}") == 0
    assert site.paths("huge.test") == []
    assert run.summary["ignored_by_reason"] == {"crawl_delay": 1}
    assert "Crawl-delay over WEBRACE_MAX_CRAWL_DELAY: huge.test (1e+09s)" in run.stderr


# -- pacing ------------------------------------------------------------------------------


def test_pacing_waits_the_crawl_delay_and_rests_longer_after_slower_answers(site, project):
    site.robots("User-agent: *\nCrawl-delay: 0.2\n")
    pages = [f"/fast{n}.html" for n in range(3)] + ["/slow.html"]
    site.html("/", pages)
    for path in pages:
        site.html(path, ["/after.html"] if path == "/slow.html" else [])
    # found only on the slow page and the page after it: two requests always follow it
    site.html("/after.html", ["/last.html"])
    site.html("/last.html")
    site.delays["/slow.html"] = 0.6
    project.add_urds(urd("u", "ann", site.url("/"), depth=3))
    run = project.crawl(WEBRACE_DELAY_FACTOR=2, CONCURRENT_REQUESTS_PER_DOMAIN=8)
    hits = sorted((h for h in site.hits if h.path != "/robots.txt"), key=lambda h: h.at)
    assert len(hits) == 7
    starts = [b.at - a.at for a, b in zip(hits, hits[1:], strict=False)]
    assert min(starts) >= 0.2 - 0.02, starts  # Crawl-delay between starts (a little clock slack)
    assert all(b.at >= a.done for a, b in zip(hits, hits[1:], strict=False))  # one request at a time
    rests = {a.path: b.at - a.done for a, b in zip(hits, hits[1:], strict=False)}
    slow = next(h for h in hits if h.path == "/slow.html")
    assert rests["/slow.html"] >= 2 * (slow.done - slow.at) - 0.05  # twice what the answer took
    assert rests["/slow.html"] > max(r for p, r in rests.items() if p != "/slow.html")
    # the long rest is not carried to the fast answer after it (Scrapy had already timed the
    # next start by the old delay when that answer came)
    after = next(h for h in hits if h.path == "/after.html")
    assert rests["/after.html"] < max(0.2, 2 * (after.done - after.at)) + 0.3, rests
    assert run.stat("pacing/127.0.0.1/delay_max") >= 1.2
    assert "Pacing, rest after each answer: 127.0.0.1 mean" in run.stderr


# -- traps -------------------------------------------------------------------------------


def _calendar(host: str, path: str):
    """Every page links one segment deeper and to the next ``?page=``: never ends."""
    base, _, query = path.partition("?")
    page = int(query.split("=")[1]) if query.startswith("page=") else 0
    if not base.startswith("/cal"):
        return None
    deeper = base.rstrip("/") + "/x"
    body = f'<html><body><a href="{deeper}">deeper</a> <a href="{base}?page={page + 1}">next</a></body></html>'
    return 200, {"Content-Type": "text/html"}, body.encode()


def test_calendar_trap_ends_within_its_budget(site, project):
    site.fallback = _calendar
    project.add_urds(urd("cal", "ann", site.url("/cal"), depth=64))
    run = project.crawl(WEBRACE_TRAP_MAX_QUERIES_PER_PATH=25)
    assert run.returncode == 0
    assert run.summary["reason"] == "finished"
    paths = site.paths()
    # four paths (/cal, /cal/x, /cal/x/x, /cal/x/x/x), each with at most 25 queries
    assert len(paths) <= 4 * 26
    assert max(p.count("/x") for p in paths) == 3
    assert run.summary["ignored_by_reason"]["trap"] > 0


def test_page_budget_stops_an_endless_site_and_the_summary_says_so(site, project):
    def months(host: str, path: str):
        if not path.startswith("/month/"):
            return None
        n = int(path.rsplit("/", 1)[1])
        return 200, {"Content-Type": "text/html"}, f'<a href="/month/{n + 1}">next</a>'.encode()

    site.fallback = months
    project.add_urds(urd("months", "ann", site.url("/month/0"), depth=64))
    run = project.crawl(WEBRACE_MAX_PAGES_PER_URD=30)
    assert len(site.paths()) == 30
    assert run.summary["ignored_by_reason"] == {"budget": 1}
    assert "Page budget reached (WEBRACE_MAX_PAGES_PER_URD), links past it not followed, for URDs: months (30 pages)" \
        in run.stderr


# -- redirects ---------------------------------------------------------------------------


def test_redirects_out_of_scope_into_robots_or_a_trap_store_and_emit_nothing(site, project):
    host, other = "home.test", "elsewhere.test"
    site.robots("User-agent: *\nDisallow: /private/\n", host=host)
    site.html("/", ["/away", "/hidden", "/deep", "/stay"], host=host)
    site.add("/away", b"", status=302, headers={"Location": site.url("/landing.html", host=other)}, host=host)
    site.add("/hidden", b"", status=301, headers={"Location": "/private/x.html"}, host=host)
    site.add("/deep", b"", status=302, headers={"Location": "/d/d/d/d/d.html"}, host=host)
    site.add("/stay", b"", status=302, headers={"Location": "/kept.html"}, host=host)
    site.html("/kept.html", host=host)
    site.html("/landing.html", host=other)
    site.html("/private/x.html", host=host)
    project.add_urds(urd("home", "ann", site.url("/", host=host), depth=1))
    run = project.crawl()
    assert site.paths(other) == []
    assert "/private/x.html" not in site.paths(host) and "/d/d/d/d/d.html" not in site.paths(host)
    assert set(run.by_url) == {site.url("/", host=host), site.url("/kept.html", host=host)}
    assert run.summary["ignored_by_reason"] == {"redirect_scope": 1, "robots": 1, "trap": 1}
    listing = project.scrapy("store", "list")
    assert other not in listing.stdout and "private" not in listing.stdout
