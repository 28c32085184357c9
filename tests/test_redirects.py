"""One download per page per round, however it is reached: links, 301/302 chains, nginx
``rewrite`` rules, directory redirects and a meta-refresh start page, against a real nginx
(tests/nginx.py), first crawl and conditional re-crawl. (The round engine's side, in both
modes: tests/test_round_engine.py and tests/test_frontier_contract.py.)"""

from __future__ import annotations

from conftest import Run, urd
from test_distributed import finish, schedule, start_worker, worker_project


def page(title: str, *links: str, head: str = "") -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return f"<html><head><title>{title}</title>{head}</head><body><h1>{title}</h1><ul>{anchors}</ul></body></html>"


# /old/X -> 301 /new/X (rewrite ... permanent); /tmp/X -> 302 /chain/X -> 301 /new/X (a chain);
# /internal/X is /new/X served under its own URL (rewrite ... last: no redirect);
# /moved.html -> 301 /en/index.html (a page the round fetched already); /docs -> 301 /docs/ (nginx's own).
REWRITES = """
        rewrite ^/old/(.*)$ /new/$1 permanent;
        rewrite ^/tmp/(.*)$ /chain/$1 redirect;
        rewrite ^/chain/(.*)$ /new/$1 permanent;
        rewrite ^/internal/(.*)$ /new/$1 last;
        location = /moved.html { return 301 /en/index.html; }
"""


def redirect_site(nginx) -> None:
    nginx.extra = REWRITES
    # the Apache manual's way: a start page that only refreshes to the real one
    nginx.write("/index.html", page("Redirecting", head='<meta http-equiv="refresh" content="0; url=en/index.html">'))
    nginx.write("/en/index.html", page("Manual", "/old/a.html", "/new/a.html", "/docs", "/tmp/b.html",
                                       "/internal/c.html", "/moved.html", "/en/index.html"))
    nginx.write("/new/a.html", page("A", "/old/b.html", "/docs/", "/index.html", "/en/"))
    nginx.write("/new/b.html", page("B", "/tmp/a.html", "/new/c.html"))
    nginx.write("/new/c.html", page("C", "/old/c.html"))
    nginx.write("/docs/index.html", page("Docs", "page.html", "/docs", "/old/a.html"))
    nginx.write("/docs/page.html", page("Docs page", "/tmp/b.html", "/moved.html"))
    nginx.start()


def assert_one_download_each_and_items_are_pages(nginx, run, start: str) -> None:
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[run.stderr.index("Traceback") - 200:][:3000]
    downloads = nginx.downloads()
    assert downloads and max(downloads.values()) == 1, {u: n for u, n in downloads.items() if n > 1}
    urls = [item["url"] for item in run.pages]
    assert len(urls) == len(set(urls)), sorted(urls)
    for item in run.pages:
        if item["url"] == start:
            assert item["parent_url"] is None
        else:
            assert item["parent_url"] in urls and item["parent_url"] != item["url"], item


def test_every_page_of_a_site_of_redirects_and_a_meta_refresh_start_page_is_downloaded_once_per_crawl(
        project, nginx):
    redirect_site(nginx)
    start = nginx.url("/index.html")
    project.add_urds(urd("manual", "alice", start, depth=4))

    first = project.crawl()
    assert_one_download_each_and_items_are_pages(nginx, first, start)
    pages = {item["url"]: item for item in first.pages}
    assert set(pages) == {nginx.url(p) for p in ("/index.html", "/en/index.html", "/en/", "/new/a.html", "/new/b.html",
                                                  "/new/c.html", "/docs/", "/docs/page.html", "/internal/c.html")}
    assert pages[start]["version"] == 1 and nginx.url("/en/index.html") in pages[start]["links"]  # stored
    assert pages[nginx.url("/new/a.html")]["parent_url"] == nginx.url("/en/index.html")
    assert pages[nginx.url("/docs/page.html")]["parent_url"] == nginx.url("/docs/")  # the URL stored, not /docs
    statuses = {(uri, status) for _, uri, status in nginx.requests()}
    assert {("/old/a.html", 301), ("/docs", 301), ("/tmp/b.html", 302)} <= statuses

    nginx.clear_log()
    project.make_due()
    again = project.crawl()
    assert_one_download_each_and_items_are_pages(nginx, again, start)
    assert {item["url"] for item in again.pages} == set(pages)
    assert ("GET", "/index.html", 304) in nginx.requests()  # the meta-refresh page's re-crawl is conditional
    assert all(status in (301, 302, 304, 404) for _, _, status in nginx.requests())  # nothing in full again


def test_a_meta_refresh_target_is_crawled_with_the_depth_budget_of_the_page_that_refreshes(project, nginx):
    redirect_site(nginx)
    start = nginx.url("/index.html")
    project.add_urds(urd("top", "alice", start, depth=0))
    first = project.crawl()
    assert_one_download_each_and_items_are_pages(nginx, first, start)
    # depth 0: the start page and where it refreshes to (the same page to a reader), no link of it
    assert {item["url"] for item in first.pages} == {start, nginx.url("/en/index.html")}

    nginx.clear_log()
    project.make_due()
    again = project.crawl()
    assert {item["url"] for item in again.pages} == {start, nginx.url("/en/index.html")}
    assert sorted(r for r in nginx.requests() if r[1] != "/robots.txt") == [
        ("GET", "/en/index.html", 304), ("GET", "/index.html", 304)]


def test_a_refresh_leaving_the_urds_scope_is_not_followed(project, nginx):
    nginx.start()  # (its port, for the page's refresh to another host of it)
    nginx.write("/index.html", page("In", head=f'<meta http-equiv="refresh" content="0; url=http://other.test:'
                                              f'{nginx.port}/x.html">'))
    nginx.write("/x.html", page("Out"))
    start = nginx.url("/index.html")
    project.add_urds(urd("in", "alice", start, depth=2, scope="host"))
    run = project.crawl()
    assert [item["url"] for item in run.pages] == [start]
    assert run.pages[0]["version"] == 1  # stored all the same
    assert "/x.html" not in nginx.downloads()


def test_two_workers_download_every_page_of_the_redirect_site_once(nginx, tmp_path, redis_url, redis_prefix):
    redirect_site(nginx)
    env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
           "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared-objects")}
    start = nginx.url("/index.html")
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(urd("manual", "alice", start, depth=4))
    schedule(scheduler)
    a, b = worker_project(tmp_path, "a", env), worker_project(tmp_path, "b", env)
    (pa, oa), (pb, ob) = start_worker(a, WEBRACE_MAX_LEASED=2), start_worker(b, WEBRACE_MAX_LEASED=2)
    run_a, run_b = finish(a, pa, oa), finish(b, pb, ob)
    both = Run(run_a.returncode or run_b.returncode, "", run_a.stderr + run_b.stderr, run_a.items + run_b.items, {})
    assert_one_download_each_and_items_are_pages(nginx, both, start)
    assert len(both.pages) == 9
