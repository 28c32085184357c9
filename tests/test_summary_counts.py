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


def test_crawl_delay_log_names_the_delay_robots_txt_asked_and_what_applied(site, project):
    site.robots("User-agent: *\nCrawl-delay: 0.2\n")
    site.html("/")
    project.add_urds(urd("u", "ann", site.url("/")))
    run = project.crawl()
    assert "Honouring robots.txt Crawl-delay of 0.2s for 127.0.0.1" in run.stderr
    run = project.crawl("-a", "urd=u", DOWNLOAD_DELAY=0.5)
    assert "Crawl-delay of 0.2s for 127.0.0.1; DOWNLOAD_DELAY=0.5s is longer and applies" in run.stderr
