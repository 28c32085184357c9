"""Annotation during the crawl: ACIs per owner for new versions, irrelevant bodies dropped."""

from __future__ import annotations

import json

from conftest import urd

from webrace.backends.sqlite import SqliteAciStore
from webrace.xmlutil import schema

JAVA_PAGE = ("<html><head><title>Jobs</title></head><body><p>Java developers wanted. We write Java "
             "and a little Python. Research on Java crawlers.</p><a href='/x'>java java java</a></body></html>")


def next_round(project):
    project.make_due()


def test_two_owners_get_their_own_aci_with_their_own_relevance(site, project):
    site.add("/", JAVA_PAGE)
    project.add_urds(urd("a", "alice", site.url("/"), keywords={"java": 2, "research": 5}),
                     urd("b", "bob", site.url("/"), keywords={"python": 3, "cobol": 9}))
    run = project.crawl()
    assert run.returncode == 0, run.stderr
    assert len(run.pages) == 1 and site.count("/") == 1  # fetched once for both
    by_owner = {a["owner"]: a for a in run.acis}
    assert sorted(by_owner) == ["alice", "bob"]
    # link text is not page text: "java" 3 times in the text, "research" once, "python" once
    assert by_owner["alice"]["relevance"] == 2 * 3 + 5 * 1
    assert by_owner["bob"]["relevance"] == 3 * 1
    assert by_owner["alice"]["docbase"] == run.pages[0]["digest"] == by_owner["bob"]["docbase"]
    assert by_owner["alice"]["title"] == "Jobs" and "Java" in by_owner["alice"]["summary"]
    assert run.pages[0]["relevant_to"] == ["alice", "bob"] and run.pages[0]["kept"] is True
    assert run.stat("webrace/acis") == 2
    with SqliteAciStore(project.data / "aci.sqlite") as store:
        stored = store.list("alice")
        assert [a.relevance for a in stored] == [11]
        schema("aci").validate(stored[0].to_xml())


def objects(project) -> list:
    root = project.data / "objects"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_irrelevant_body_is_dropped_but_the_recrawl_stays_conditional(site, project):
    site.validators = True
    site.add("/", "<html><body><p>Nothing about coffee here.</p></body></html>")
    project.add_urds(urd("a", "alice", site.url("/"), keywords={"java": 1}))
    first = project.crawl()
    page = first.pages[0]
    assert first.acis == [] and page["relevant_to"] == [] and page["kept"] is False
    assert first.stat("webrace/bodies_dropped") == 1 and objects(project) == []
    assert project.scrapy("store", "versions", site.url("/")).returncode == 1  # no version kept
    site.clear_hits()
    next_round(project)
    second = project.crawl()
    hit = [h for h in site.hits if h.path == "/"][0]
    assert hit.headers.get("If-None-Match") and hit.status == 304  # still a conditional GET
    assert second.pages[0]["not_modified"] and second.acis == []
    # the page changes and becomes relevant: a new version, numbered after the dropped one, kept
    site.add("/", "<html><body><p>Java, at last.</p></body></html>")
    next_round(project)
    third = project.crawl()
    assert third.pages[0]["version"] == 2 and third.pages[0]["kept"] is True
    assert [a["owner"] for a in third.acis] == ["alice"]
    assert "Java, at last." in project.scrapy("store", "get", site.url("/")).stdout


def test_drop_irrelevant_can_be_turned_off(site, project):
    site.add("/", "<html><body><p>Nothing about coffee here.</p></body></html>")
    project.add_urds(urd("a", "alice", site.url("/"), keywords={"java": 1}))
    run = project.crawl(WEBRACE_DROP_IRRELEVANT=False)
    assert run.pages[0]["kept"] is True and run.stat("webrace/irrelevant") == 1 and len(objects(project)) == 1


def test_no_aci_for_a_304_or_an_unchanged_body(site, project):
    site.validators = True
    site.add("/", JAVA_PAGE)
    project.add_urds(urd("a", "alice", site.url("/"), keywords={"java": 1}))
    assert len(project.crawl().acis) == 1
    next_round(project)
    second = project.crawl()
    assert second.pages[0]["not_modified"] and second.acis == []
    site.validators = False  # the server stops answering conditionally: 200, same body
    next_round(project)
    third = project.crawl()
    assert third.pages[0]["status"] == 200 and not third.pages[0]["new_version"] and third.acis == []
    with SqliteAciStore(project.data / "aci.sqlite") as store:
        assert len(store.list("alice")) == 1


def test_threshold_and_owners_without_keywords(site, project):
    site.add("/", JAVA_PAGE)  # java x3, research x1, python x1
    project.add_urds(
        urd("high", "alice", site.url("/"), keywords={"java": 1}, threshold=4),  # 3 < 4: no ACI
        urd("low", "bob", site.url("/"), keywords={"java": 1}, threshold=3),  # 3 >= 3: an ACI
        urd("archive", "carol", site.url("/")),  # no keywords: no ACI, the page is kept for her
    )
    run = project.crawl()
    assert [(a["owner"], a["relevance"]) for a in run.acis] == [("bob", 3)]
    assert run.pages[0]["owners"] == ["alice", "bob", "carol"] and run.pages[0]["kept"] is True


def test_an_owner_with_two_urds_gets_one_aci_with_the_union_of_their_keywords(site, project):
    site.add("/", JAVA_PAGE)
    project.add_urds(urd("one", "alice", site.url("/"), keywords={"java": 1, "python": 2}),
                     urd("two", "alice", site.url("/"), keywords={"java": 4, "research": 1}))
    run = project.crawl()
    assert [(a["owner"], a["relevance"]) for a in run.acis] == [("alice", 4 * 3 + 2 * 1 + 1 * 1)]


def test_hostile_text_never_crashes_the_processor(site, project):
    # declared UTF-8, not UTF-8; a keyword full of regex metacharacters; NUL and control bytes
    body = (b"<html><head><meta charset='utf-8'><title>\x01bad\xff</title></head><body><p>"
            b"caf\xe9 \xff\xfe C++ (a|b)* C++ \x00 \x07 end</p></body></html>")
    site.add("/", body, content_type="text/html; charset=utf-8")
    project.add_urds(urd("a", "alice", site.url("/"), keywords={"c++": 2, "(a|b)*": 1, ".*": 100}))
    run = project.crawl()
    assert run.returncode == 0 and "Traceback" not in run.stderr
    assert [(a["owner"], a["relevance"]) for a in run.acis] == [("alice", 2 * 2 + 1)]
    with SqliteAciStore(project.data / "aci.sqlite") as store:
        schema("aci").validate(store.list("alice")[0].to_xml())


DIES = {"webrace.middlewares.outage.RedisOutageMiddleware": 10, "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
        "webrace.sentinels.crawl.SentinelMiddleware": 960, "webrace.annotation.middleware.AnnotationMiddleware": 950,
        "dies_mid_page.DieBeforeAnnouncing": 990}


def test_a_version_recorded_by_a_crawl_that_died_before_its_item_went_out_is_announced_by_the_next_304(
        site, project):
    site.validators = True
    site.add("/", JAVA_PAGE.replace("</body>", "<a href='/b'>b</a></body>"))
    site.add("/b", JAVA_PAGE)
    project.add_urds(urd("a", "alice", site.url("/"), depth=1, keywords={"java": 1}))
    died = project.crawl(SPIDER_MIDDLEWARES=json.dumps(DIES), WEBRACE_TEST_DIE_ON="/b")
    assert died.returncode == 137 and site.count("/b") == 1
    next_round(project)
    second = project.crawl()
    page = next(p for p in second.pages if p["url"] == site.url("/b"))
    assert page["not_modified"] and page["new_version"] and page["version"] == 1  # a 304 announcing version 1
    assert [(a["uri"], a["version"]) for a in second.acis if a["uri"] == site.url("/b")] == [(site.url("/b"), 1)]
    # ("/" too if the crawl died before its item's mark was written: announced again, its ACI kept once)
    assert second.stat("webrace/announced_again") in (1, 2)
    next_round(project)
    third = project.crawl()  # announced once: the next 304 is no news
    assert not any(p["new_version"] for p in third.pages) and third.acis == []
    with SqliteAciStore(project.data / "aci.sqlite") as store:
        assert sorted(a.uri for a in store.list("alice")) == sorted([site.url("/"), site.url("/b")])
