"""Rules in `scrapy crawl urd`, `scrapy results`, and `scrapy rules run` offline."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import urd

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "university"

TEMPLATE = """<template>
  <rule name="Visits" class="rule_fixtures.Visits"/>
  <rule name="TextUrls" class="rule_fixtures.TextUrls"/>
  <rule name="Nothing" class="rule_fixtures.Nothing"/>
  <rule name="CountVisits" class="rule_fixtures.ReadsOther"><param name="other">Visits</param></rule>
  <rule name="Totals" class="rule_fixtures.Totals"/>
</template>"""


def small_site(site):
    site.html("/", ["/a.html", "/b.html"], text="Start. For the archive see /hidden.html please.")
    site.html("/a.html", ["/"], text="Page a")
    site.html("/b.html", text="Page b")
    site.html("/hidden.html", text="Only a rule finds me")
    return site


def export(project, *args):
    result = project.scrapy("results", "export", "-o", "-", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_every_document_is_seen_once_by_every_rule_and_enqueued_urls_are_crawled(site, project):
    small_site(site)
    project.write("template.xml", TEMPLATE)
    project.add_urds(urd("u", "alice", site.url("/"), depth=1))
    run = project.crawl("-a", "template=template.xml")
    assert run.returncode == 0, run.stderr[-3000:]
    assert site.count("/hidden.html") == 1  # no page links to it: the rule enqueued it
    urls = sorted(site.url(p) for p in ("/", "/a.html", "/b.html", "/hidden.html"))
    rows = export(project)
    for rule in ("Visits", "TextUrls", "Nothing", "CountVisits"):
        assert sorted(r["url"] for r in rows if r["rule"] == rule) == urls  # once each, empty ones included
    assert {r["url"]: r["results"] for r in rows if r["rule"] == "CountVisits"} == {u: [1] for u in urls}
    totals = [(r["url"], r["seq"], r["results"]) for r in rows if r["rule"] == "Totals"]
    assert totals[0] == ("", 0, [{"documents": 4}])  # close(), at the end, recorded for the session
    seqs = {r["url"]: r["seq"] for r in rows if r["rule"] == "Visits"}
    assert sorted(seqs.values()) == [1, 2, 3, 4] and all(r["seq"] == seqs[r["url"]] for r in rows if r["url"])
    # results are items too (the non-empty ones)
    items = [i for i in run.items if "rule" in i]
    assert sorted(i["url"] for i in items if i["rule"] == "Visits") == urls
    assert not [i for i in items if i["rule"] == "Nothing"]
    assert run.stat("rules/documents") == 4 and run.stat("rules/enqueued") >= 1


def test_enqueued_urls_still_obey_the_urds_depth(site, project):
    small_site(site)
    project.write("template.xml", TEMPLATE)
    project.add_urds(urd("u", "alice", site.url("/"), depth=0))
    run = project.crawl("-a", "template=template.xml")
    assert run.returncode == 0 and site.count("/hidden.html") == 0


def test_results_persist_and_the_next_crawl_reads_them(site, project):
    small_site(site)
    site.validators = True
    project.write("template.xml", TEMPLATE)
    project.add_urds(urd("u", "alice", site.url("/"), depth=1))
    project.crawl("-a", "template=template.xml")
    assert not any(r["results"][0]["seen_before"] for r in export(project, "--rule", "Visits"))
    project.make_due()
    second = project.crawl("-a", "template=template.xml")
    assert second.stat("recrawl/not_modified") == 4  # 304s: the rules read the stored bodies
    visits = export(project, "--rule", "Visits")
    assert len(visits) == 4 and all(r["results"][0]["seen_before"] for r in visits)
    assert all(r["results"][0]["title"] for r in visits)
    shown = project.scrapy("results", "show", "--rule", "Visits")
    assert shown.returncode == 0 and "Visits[1,0]:" in shown.stdout


def test_a_bad_template_stops_the_crawl_before_any_request(site, project):
    small_site(site)
    project.write("template.xml", '<template><rule name="R" class="rules.RegExpRule">'
                                  '<param name="pattern">(unclosed</param></rule></template>')
    project.add_urds(urd("u", "alice", site.url("/"), depth=1))
    run = project.crawl("-a", "template=template.xml")
    assert run.returncode == 1
    assert "template.xml:1: rule 'R' (rules.RegExpRule): parameter 'pattern': not a valid regular expression" \
        in run.stderr
    assert site.hits == []
    unknown = project.crawl(WEBRACE_RULES_TEMPLATE=str(project.write("t2.xml", '<template><rule name="R" '
                                                                              'class="mine.Missing"/></template>')))
    assert unknown.returncode == 1 and "cannot import module 'mine'" in unknown.stderr and site.hits == []


def test_rules_run_offline_over_the_stored_versions_without_a_request(site, project):
    small_site(site)
    project.add_urds(urd("u", "alice", site.url("/"), depth=1))
    assert project.crawl().returncode == 0  # a crawl with no rules: the pages are stored
    project.write("template.xml", TEMPLATE)
    site.clear_hits()
    run = project.scrapy("rules", "run", "--template", "template.xml")
    assert run.returncode == 0, run.stderr
    assert site.hits == []  # the server saw nothing
    assert "over 3 stored document(s)" in run.stdout and "1 enqueued URL(s) not stored" in run.stdout
    assert sorted(r["url"] for r in export(project, "--rule", "Visits")) == sorted(
        site.url(p) for p in ("/", "/a.html", "/b.html"))
    scoped = project.scrapy("rules", "run", "--template", "template.xml", "--urd", "nope")
    assert scoped.returncode == 1 and "no URD with id nope" in scoped.stderr


def test_the_university_example_extracts_the_name_phone_numbers_and_acronyms(site, project):
    for page in ("index.html", "about.html", "contact.html"):
        site.add(f"/{page}", (EXAMPLE / "site" / page).read_bytes())
    project.add_urds(urd("lsu", "alice", site.url("/index.html"), depth=1))
    run = project.crawl("-a", f"template={EXAMPLE / 'template.xml'}")
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {(r["rule"], r["url"].rsplit("/", 1)[1]): r["results"] for r in export(project)}
    assert rows[("UniversityName", "index.html")] == ["Lakeview State University"] * 2
    assert rows[("UniversityName", "about.html")] == ["Lakeview State University", "University of Lake Mira",
                                                      "Lakeview State University"]
    assert rows[("PhoneNumber", "index.html")] == ["(555) 301-4400", "301-4411"]
    assert rows[("PhoneNumber", "about.html")] == ["(555) 301-4000"]
    assert rows[("PhoneNumber", "contact.html")] == ["301-4455"]
    assert rows[("Acronym", "index.html")] == ["LSU", "MBA", "LSU", "NCAA", "II"]
    assert rows[("BFS", "index.html")] == []
