"""Annotation during the crawl: ACIs per owner for new versions, irrelevant bodies dropped."""

from __future__ import annotations

from conftest import urd

from webrace.backends.sqlite import SqliteAciStore
from webrace.xmlutil import schema

JAVA_PAGE = ("<html><head><title>Jobs</title></head><body><p>Java developers wanted. We write Java "
             "and a little Python. Research on Java crawlers.</p><a href='/x'>java java java</a></body></html>")


def next_round(project):
    made = project.scrapy("urd", "due", "--all")
    assert made.returncode == 0, made.stderr


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
