"""`scrapy crawl urd` against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

from conftest import urd


def test_depth_zero_fetches_only_the_urd_page(site, project):
    site.html("/", ["/a.html"])
    site.html("/a.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=0))
    run = project.crawl()
    assert run.returncode == 0, run.stderr
    assert site.paths() == ["/"]
    assert [i["url"] for i in run.items] == [site.url("/")]
    assert run.summary["ignored_by_reason"] == {"depth": 1}


def test_depth_limit_follows_links_exactly_n_levels(site, project):
    site.html("/", ["/l1.html"])
    site.html("/l1.html", ["/l2.html"])
    site.html("/l2.html", ["/l3.html"])
    site.html("/l3.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=2))
    run = project.crawl()
    assert sorted(site.paths()) == ["/", "/l1.html", "/l2.html"]
    assert {i["url"]: i["depth"] for i in run.items} == {
        site.url("/"): 0, site.url("/l1.html"): 1, site.url("/l2.html"): 2,
    }
    assert run.by_url[site.url("/l2.html")]["parent_url"] == site.url("/l1.html")


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


def test_host_scope_does_not_follow_links_to_other_hosts(site, project):
    other = site.url("/other.html", host="other.test")
    site.html("/", ["/same.html", other], host="www.site.test")
    site.html("/same.html")
    site.html("/other.html")
    project.add_urds(urd("u1", "alice", site.url("/", host="www.site.test"), depth=1))
    run = project.crawl()
    assert {h.host for h in site.hits} == {"www.site.test"}
    assert run.summary["ignored_by_reason"].get("scope") == 1
    assert other not in run.by_url


def test_domain_scope_follows_sibling_hosts_but_not_other_domains(site, project):
    sibling = site.url("/s.html", host="news.site.test")
    foreign = site.url("/f.html", host="other.test")
    site.html("/", [sibling, foreign], host="www.site.test")
    site.html("/s.html")
    site.html("/f.html")
    project.add_urds(urd("u1", "alice", site.url("/", host="www.site.test"), depth=1, scope="domain"))
    run = project.crawl()
    assert {h.host for h in site.hits} == {"www.site.test", "news.site.test"}
    assert sibling in run.by_url and foreign not in run.by_url
    assert run.summary["ignored_by_reason"].get("scope") == 1


def test_any_scope_follows_every_host(site, project):
    foreign = site.url("/f.html", host="other.test")
    site.html("/", [foreign], host="www.site.test")
    site.html("/f.html")
    project.add_urds(urd("u1", "alice", site.url("/", host="www.site.test"), depth=1, scope="any"))
    run = project.crawl()
    assert foreign in run.by_url
