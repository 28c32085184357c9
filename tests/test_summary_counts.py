"""The crawl summary's counts mean what the README says, over re-crawls and rounds; log
lines name the setting that applied."""

from __future__ import annotations

from conftest import urd


def _site(site) -> None:
    site.validators = True
    site.html("/", ["/a.html", "/b.html", "http://elsewhere.test/x.html", "/doc.pdf"])
    site.html("/a.html", ["/b.html"])
    site.html("/b.html")


def test_a_304_recrawl_discovers_the_stored_links_as_the_first_crawl_did(site, project):
    _site(site)
    project.add_urds(urd("u", "ann", site.url("/"), depth=2))
    first = project.crawl()
    project.make_due()
    again = project.crawl()
    assert again.stat("recrawl/not_modified") == 3
    # the .pdf is dropped before the link is stored: all but it were found again
    assert first.summary["discovered"] == 5 and again.summary["discovered"] == 4


def test_continuous_rounds_count_an_ignored_link_once(site, project):
    _site(site)
    project.add_urds(urd("u", "ann", site.url("/"), depth=2, timing=200))
    run = project.crawl(WEBRACE_CONTINUOUS=True, CLOSESPIDER_ITEMCOUNT=9)  # three rounds of three pages
    assert run.stat("webrace/rounds") >= 3
    assert run.summary["ignored_by_reason"] == {"scope": 1, "type": 1}
    assert run.summary["discovered"] == 5


def test_a_cap_counts_only_links_in_scope_so_off_site_links_hide_no_on_site_one(site, project):
    """Issue 41's changelog page: 2,881 off-site links, then 4 on-site ones, under a cap of
    2,000 links per page: the 4 are followed, and each URL is counted once."""
    off_site = [f"http://mirror{i}.test/changes/{i}.html" for i in range(2881)]
    on_site = [f"/release-{i}.html" for i in range(4)]
    site.html("/", [*off_site, *on_site])
    for path in on_site:
        site.html(path)
    project.add_urds(urd("u", "ann", site.url("/"), depth=1))
    run = project.crawl(WEBRACE_MAX_LINKS_PER_PAGE=2000)
    assert sorted(site.paths()) == sorted(["/", *on_site])
    assert set(run.by_url) == {site.url("/"), *(site.url(p) for p in on_site)}
    summary = run.summary
    assert summary["ignored_by_reason"] == {"scope": 2881}
    assert (summary["discovered"], summary["followed"], summary["ignored"], summary["error"]) == (2886, 5, 2881, 0)


def test_links_past_the_cap_are_followed_from_another_page_and_counted_once(site, project):
    site.html("/", ["/a.html", "/b.html", "/c.html"])
    site.html("/a.html", ["/c.html", "/d.html"])
    for path in ("/b.html", "/c.html", "/d.html"):
        site.html(path)
    project.add_urds(urd("u", "ann", site.url("/"), depth=2))
    run = project.crawl(WEBRACE_MAX_LINKS_PER_PAGE=2)
    # "/" offers a and b (c is past its cap); a offers c and d
    assert sorted(site.paths()) == ["/", "/a.html", "/b.html", "/c.html", "/d.html"]
    assert run.summary["ignored"] == 0
    assert (run.summary["discovered"], run.summary["followed"]) == (5, 5)


def test_a_continuous_crawl_counts_each_url_once_across_rounds_and_refusals(site, project):
    site.robots("User-agent: *\nDisallow: /private/\n")
    site.html("/", ["/a.html", "/private/p.html", "/gone.html", "http://elsewhere.test/x.html", "mailto:a@b.test"])
    site.html("/a.html", ["/", "/private/p.html"])
    site.html("/private/p.html")
    project.add_urds(urd("u", "ann", site.url("/"), depth=2, timing=200))
    run = project.crawl(WEBRACE_CONTINUOUS=True, CLOSESPIDER_ITEMCOUNT=9)  # three rounds of three pages
    assert run.stat("webrace/rounds") >= 3
    summary = run.summary
    assert summary["ignored_by_reason"] == {"robots": 1, "scope": 1}
    assert summary["failed_by_reason"] == {"http_404": 1}
    assert summary["error_by_reason"] == {"scheme": 1}
    assert (summary["discovered"], summary["followed"]) == (6, 3)


def test_crawl_delay_log_names_the_delay_robots_txt_asked_and_what_applied(site, project):
    site.robots("User-agent: *\nCrawl-delay: 0.2\n")
    site.html("/")
    project.add_urds(urd("u", "ann", site.url("/")))
    run = project.crawl()
    assert "Honouring robots.txt Crawl-delay of 0.2s for 127.0.0.1" in run.stderr
    run = project.crawl("-a", "urd=u", DOWNLOAD_DELAY=0.5)
    assert "Crawl-delay of 0.2s for 127.0.0.1; DOWNLOAD_DELAY=0.5s is longer and applies" in run.stderr
