"""The seed's coalescing end to end: one download per page per crawl, every owner on its item
(the engine's cases are in test_round_engine.py)."""

from __future__ import annotations

from conftest import urd


def test_page_reached_for_two_owners_is_downloaded_once_with_both_owners(site, project):
    site.html("/", ["/shared.html", "/alice-only.html"])
    site.html("/shared.html")
    site.html("/alice-only.html")
    project.add_urds(
        urd("a1", "alice", site.url("/"), depth=1),
        urd("b1", "bob", site.url("/shared.html"), depth=0),
    )
    run = project.crawl()
    assert site.count("/shared.html") == 1
    assert run.by_url[site.url("/shared.html")]["owners"] == ["alice", "bob"]
    assert run.by_url[site.url("/alice-only.html")]["owners"] == ["alice"]
    assert run.by_url[site.url("/")]["owners"] == ["alice"]
