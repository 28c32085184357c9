"""Hostile or broken input during a crawl: counted, never a crash, never a stray request."""

from __future__ import annotations

from conftest import urd


def test_unsupported_schemes_malformed_and_overlong_links_are_skipped_and_counted(site, project):
    long_link = "/" + "x" * 3000 + ".html"
    site.html("/", [
        "mailto:someone@example.org", "javascript:void(0)", "ftp://files.test/a", "tel:+100",
        "http://[::1/broken", "http://bad host.test/", "http://www.site.test:99999/",
        long_link, "/fine.html",
    ])
    site.html("/fine.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert run.returncode == 0
    assert sorted(site.paths()) == ["/", "/fine.html"]
    assert run.summary["error_by_reason"] == {"scheme": 4, "malformed": 3, "too_long": 1}
    assert run.by_url[site.url("/")]["links"] == [site.url("/fine.html")]


def test_oversized_body_is_counted_as_failed(site, project):
    site.html("/", ["/big.html", "/ok.html"])
    site.add("/big.html", b"<html>" + b"x" * 200_000 + b"</html>")
    site.html("/ok.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl(DOWNLOAD_MAXSIZE=100_000)
    assert run.returncode == 0
    assert run.summary["failed_by_reason"] == {"too_large": 1}
    assert set(run.by_url) == {site.url("/"), site.url("/ok.html")}


def test_redirect_loop_is_counted_as_failed(site, project):
    site.html("/", ["/loop-a", "/ok.html"])
    site.add("/loop-a", b"", status=302, headers={"Location": "/loop-b"})
    site.add("/loop-b", b"", status=302, headers={"Location": "/loop-a"})
    site.html("/ok.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl(REDIRECT_MAX_TIMES=4)
    assert run.returncode == 0
    assert set(run.by_url) == {site.url("/"), site.url("/ok.html")}
    assert run.summary["failed_by_reason"] == {"redirects": 1}
    assert site.count("/loop-a") + site.count("/loop-b") == 5  # the first try and 4 redirects


def test_redirect_is_followed_and_the_final_url_reported(site, project):
    site.html("/", ["/old.html"])
    site.add("/old.html", b"", status=301, headers={"Location": "/new.html"})
    site.html("/new.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert site.url("/new.html") in run.by_url
    assert run.by_url[site.url("/new.html")]["owners"] == ["alice"]


def test_binary_body_claiming_to_be_html_is_not_parsed(site, project):
    site.html("/", ["/fake.html"])
    site.add("/fake.html", bytes(range(256)) * 40, content_type="text/html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert run.returncode == 0
    assert run.by_url[site.url("/fake.html")]["links"] == []
    assert run.stat("webrace/not_html") == 1
    assert run.summary["expanded"] == 1


def test_unreachable_hosts_are_counted_as_failed(site, project):
    import socket

    with socket.socket() as s:  # a port with nothing listening on it
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    site.html("/", [f"http://127.0.0.1:{closed_port}/", "http://nowhere.invalid/"])
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1, scope="any"))
    run = project.crawl()
    assert run.returncode == 0
    assert run.summary["failed_by_reason"] == {"refused": 1, "dns": 1}
    assert "Traceback" not in run.stderr


def test_http_error_status_is_reported_on_the_item_and_counted(site, project):
    site.html("/", ["/gone.html"])
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl()
    assert run.by_url[site.url("/gone.html")]["status"] == 404
    assert run.summary["failed_by_reason"] == {"http_404": 1}


def test_page_with_too_many_links_is_capped(site, project):
    site.html("/", [f"/p{i}.html" for i in range(50)])
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    run = project.crawl(WEBRACE_MAX_LINKS_PER_PAGE=10)
    assert sorted(site.paths()) == sorted(["/", *(f"/p{i}.html" for i in range(10))])
    assert len(run.by_url[site.url("/")]["links"]) == 50  # all stored: a re-crawl's URDs judge them again
    assert run.summary["ignored_by_reason"] == {"limit": 40}
    assert run.summary["followed"] == 11 and run.summary["discovered"] == 51


def test_link_candidates_past_the_safety_bound_are_counted_and_not_read(site, project):
    site.html("/", [f"/p{i}.html" for i in range(50)])
    project.add_urds(urd("u1", "alice", site.url("/"), depth=0))
    run = project.crawl(WEBRACE_MAX_LINK_CANDIDATES=20)
    assert run.items[0]["links"] == [site.url(f"/p{i}.html") for i in range(20)]
    assert run.stat("webrace/links_unread") == 30
    assert "more link candidates than WEBRACE_MAX_LINK_CANDIDATES=20: 30 not read" in run.stderr
    assert run.summary["discovered"] == 21 and run.summary["ignored_by_reason"] == {"depth": 20}
