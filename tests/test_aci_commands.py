"""`scrapy aci list|feed|ack`, `scrapy pir serve` and `store gc` after acknowledgement."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from conftest import Project, Run, Site, serving, urd
from lxml import etree
from scrapy.settings import Settings
from web_client import Client

from webrace.backends import open_aci_store, open_object_cache
from webrace.records.aci import Aci
from webrace.web.accounts import open_accounts
from webrace.xmlutil import schema

ATOM = "{http://www.w3.org/2005/Atom}"


def page(title: str, text: str, script: str = "") -> str:
    return f"<html><head><title>{title}</title>{script}</head><body><p>{text}</p><img src='logo.png'></body></html>"


@dataclass
class Crawled:
    site: Site
    project: Project
    first: Run
    second: Run


# The tests that only read what the two crawls left share them: one worker runs these tests
# (setup.cfg: --dist loadgroup), so the module's crawls happen once.
reads_the_crawls = pytest.mark.xdist_group("aci_commands_crawled")


@pytest.fixture(scope="module")
def crawled(tmp_path_factory) -> Iterator[Crawled]:
    """Two crawls: /news then /jobs changes; alice gets three ACIs, bob one."""
    with serving() as site:
        project = Project(tmp_path_factory.mktemp("crawled"))
        site.html("/", ["/news.html", "/jobs.html"], text="Home")
        site.add("/news.html", page("News", "Java crawlers and more java."))
        site.add("/jobs.html", page("Jobs", "We hire. Python too.", "<script>document.title='owned'</script>"))
        project.add_urds(urd("a", "alice", site.url("/"), depth=1, keywords={"java": 2, "hire": 1}),
                         urd("b", "bob", site.url("/"), depth=1, keywords={"python": 5}))
        first = project.crawl()
        assert first.returncode == 0, first.stderr
        site.add("/jobs.html", page("Jobs again", "We hire Java people."))
        project.make_due()
        second = project.crawl()
        yield Crawled(site, project, first, second)


def aci_list(project, *args):
    result = project.scrapy("aci", "list", "--format", "jsonl", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@reads_the_crawls
def test_aci_list_jsonl_has_every_field_newest_first_with_filters(crawled):
    project, first, second = crawled.project, crawled.first, crawled.second
    alice = aci_list(project, "--owner", "alice")
    assert [(a["title"], a["relevance"]) for a in alice][0] == ("Jobs again", 1 + 2)
    assert {(a["title"], a["relevance"]) for a in alice} == {("Jobs again", 3), ("News", 4), ("Jobs", 1)}
    assert set(alice[0]) >= {"id", "owner", "extension", "format", "relevance", "updatetime", "filesize", "uri",
                             "urgent", "docbase", "expired", "summary", "version"}
    assert [a["updatetime"] for a in alice] == sorted((a["updatetime"] for a in alice), reverse=True)
    assert {a["id"] for a in alice} == {a["id"] for a in first.acis + second.acis if a["owner"] == "alice"}
    assert [a["title"] for a in aci_list(project, "--owner", "alice", "--min-relevance", "3.5")] == ["News"]
    assert aci_list(project, "--owner", "alice", "--since", "2999-01-01") == []
    assert len(aci_list(project, "--owner", "alice", "--since", "1h")) == 3
    assert [a["relevance"] for a in aci_list(project, "--owner", "bob")] == [5]


@reads_the_crawls
def test_aci_list_xml_validates_and_table_is_readable(crawled):
    project = crawled.project
    xml = project.scrapy("aci", "list", "--owner", "alice", "--format", "xml")
    schema("aci").validate(xml.stdout)
    assert len(etree.fromstring(xml.stdout.encode())) == 3
    table = project.scrapy("aci", "list", "--owner", "alice")
    assert table.stdout.splitlines()[0].split()[:3] == ["UPDATED", "RELEVANCE", "URGENT"]
    missing = project.scrapy("aci", "list")
    assert missing.returncode != 0 and "--owner" in missing.stderr


@reads_the_crawls
def test_atom_feed_parses_and_lists_the_owners_acis(crawled):
    project = crawled.project
    result = project.scrapy("aci", "feed", "--owner", "alice")
    assert result.returncode == 0, result.stderr
    feed = etree.fromstring(result.stdout.encode())
    assert feed.tag == f"{ATOM}feed"
    entries = feed.findall(f"{ATOM}entry")
    ids = {a["id"] for a in aci_list(project, "--owner", "alice")}
    assert {e.findtext(f"{ATOM}id").rsplit(":", 1)[1] for e in entries} == ids
    assert [e.findtext(f"{ATOM}title") for e in entries][0] == "Jobs again"
    assert all(e.find(f"{ATOM}link").get("href").startswith("http://127.0.0.1:") for e in entries)
    for required in ("id", "title", "updated"):
        assert feed.findtext(f"{ATOM}{required}")


@reads_the_crawls
def test_pir_page_lists_the_acis_newest_first_and_its_links_serve_the_stored_versions(crawled):
    """`scrapy pir serve` (the old name of `scrapy web serve`): alice, logged in, sees her ACIs."""
    project, site = crawled.project, crawled.site
    settings = Settings({"WEBRACE_DATA_DIR": str(project.data)})
    with open_accounts(settings) as accounts:
        accounts.add("alice", "alice-secret")
    server = subprocess.Popen([sys.executable, "-m", "scrapy", "pir", "serve", "--port", "0"], cwd=project.root,
                              env=project.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()
        base = line.split(" on ", 1)[1].split("/ ", 1)[0]
        assert base.startswith("http://127.0.0.1:")
        client = Client(base)
        assert client.get("/owner/alice/").status == 302  # nothing without a login
        assert client.login("alice", "alice-secret").status == 302
        answer = client.get("/owner/alice/")
        assert answer.status == 200
        html = answer.text
        titles = [t for t in ("Jobs again", "News", "Jobs<") if t in html]
        assert html.index("Jobs again") < html.index("News")  # newest first
        assert len(titles) == 3
        links = etree.HTML(html).xpath("//a[starts-with(@href, '/stored/')]/@href")
        assert len(links) == 3
        bodies = {}
        for link in links:
            stored = client.get(link)
            assert stored.status == 200 and stored.headers["Content-Type"].startswith("text/html")
            assert "sandbox" in stored.headers["Content-Security-Policy"]  # the archived page's scripts never run
            bodies[link] = stored.text
        assert any("We hire Java people." in b for b in bodies.values())
        old_jobs = next(b for b in bodies.values() if "Python too." in b)
        assert f'<base href="{site.url("/jobs.html")}">' in old_jobs  # relative links go to the site
        feed = client.get("/owner/alice/feed.atom")
        assert feed.status == 200 and feed.headers["Content-Type"].startswith("application/atom+xml")
        assert len(etree.fromstring(feed.text.encode()).findall(f"{ATOM}entry")) == 3
        assert client.get("/stored/nope").status == 404 and client.get("/owner/bob/").status == 403
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_ack_then_gc_drops_the_acknowledged_old_version_and_keeps_an_unacknowledged_one(project):
    """Three versions of a page, each with alice's ACI, stored here as a crawl stores them (the
    crawl side: tests/test_annotation_crawl.py); `aci ack` and `store gc` are run as typed."""
    url = "http://a.test/"
    with open_object_cache(project.settings()) as cache, open_aci_store(project.settings()) as store:
        for n in range(3):
            stored = cache.record_fetch(url, 200, f"<html><body>java edition {n}</body></html>".encode(),
                                        fetched=1000 + n, header="HTTP/1.1 200 OK\nContent-Type: text/html", links=[])
            store.add([Aci("alice", url, 1.0, 1000 + n, stored.meta.size, stored.version, stored.meta.digest, "java")])
        acis = sorted(store.list("alice"), key=lambda a: a.version)
    assert [a.version for a in acis] == [1, 2, 3]
    ack = project.scrapy("aci", "ack", "--owner", "alice", acis[0].id)
    assert ack.returncode == 0 and "Acknowledged 1" in ack.stdout
    gc = project.scrapy("store", "gc", "--keep", "1")
    assert "dropped 1 version(s)" in gc.stdout, gc.stdout + gc.stderr
    versions = project.scrapy("store", "versions", url).stdout.splitlines()[1:]
    assert [line.split()[0] for line in versions] == ["2", "3"]  # 1 acknowledged and gone, 2 not yet read
    assert project.scrapy("aci", "ack", "--owner", "alice", "--all").stdout.startswith("Acknowledged 2")
    assert "dropped 1 version(s)" in project.scrapy("store", "gc", "--keep", "1").stdout
    bad = project.scrapy("aci", "ack", "--owner", "alice")
    assert bad.returncode != 0 and "--all" in bad.stderr


def test_ack_of_an_unknown_id_exits_1_and_acks_the_known_ones(project):
    with open_aci_store({"WEBRACE_DATA_DIR": str(project.data)}) as store:
        store.add([Aci("alice", "http://a.test/", 2.0, 1_700_000_000_000, 10, 1, "0" * 64, "java")])
        known = store.list("alice")[0].id
    ack = project.scrapy("aci", "ack", "--owner", "alice", known, "nosuch")
    assert ack.returncode == 1 and "Acknowledged 1" in ack.stdout
    assert ack.stderr.strip() == "error: alice has no ACI with id nosuch (see `scrapy aci list`)"
    again = project.scrapy("aci", "ack", "--owner", "alice", known)  # delivered already, but known
    assert again.returncode == 0 and "Acknowledged 0" in again.stdout
