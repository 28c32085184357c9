"""`scrapy crawl urd` against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

from conftest import urd


def test_page_item_has_the_contract_fields(site, project):
    site.html("/", ["/a.html", "b.html#frag", "#top"])
    site.html("/a.html")
    site.html("/b.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=0))
    run = project.crawl()
    item = run.items[0]
    assert item["url"] == site.url("/")
    assert item["parent_url"] is None
    assert item["depth"] == 0
    assert item["owners"] == ["alice"]
    assert item["urd_ids"] == ["u1"]
    assert item["status"] == 200
    assert item["content_type"] == "text/html"
    assert item["size"] > 0
    assert item["links"] == [site.url("/a.html"), site.url("/b.html")]
    assert item["fetched_at"].endswith("Z")
