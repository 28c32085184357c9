"""The seed's coalescing: one download per page per crawl, every owner on its item."""

from __future__ import annotations

from conftest import urd


def test_two_urds_naming_the_same_link_are_one_request(site, project):
    site.html("/")
    project.add_urds(urd("a1", "alice", site.url("/")), urd("b1", "bob", site.url("/")))
    run = project.crawl()
    assert site.count("/") == 1
    assert len(run.items) == 1
    assert run.items[0]["owners"] == ["alice", "bob"]
    assert run.items[0]["urd_ids"] == ["a1", "b1"]
    assert run.stat("webrace/coalesced") == 1


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


def test_overlapping_subtrees_fetch_each_page_once(site, project):
    site.html("/", ["/a.html", "/b.html"])
    site.html("/a.html", ["/c.html"])
    site.html("/b.html", ["/c.html"])
    site.html("/c.html", ["/"])
    project.add_urds(
        urd("a1", "alice", site.url("/a.html"), depth=1),
        urd("b1", "bob", site.url("/b.html"), depth=1),
        urd("c1", "carol", site.url("/"), depth=3),
    )
    run = project.crawl()
    assert sorted(site.paths()) == ["/", "/a.html", "/b.html", "/c.html"]
    assert len(run.items) == 4
    assert run.by_url[site.url("/c.html")]["owners"] == ["alice", "bob", "carol"]
