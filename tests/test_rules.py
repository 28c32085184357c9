"""Scout rules as a library: templates, the shipped rules, the engine, the results table."""

from __future__ import annotations

import pytest
from conftest import redis_space

from rules import Doc, RegExpRule
from webrace.backends.redis import RedisResultsStore
from webrace.backends.sqlite import SqliteResultsStore
from webrace.scout.engine import RuleEngine, as_results
from webrace.scout.template import TemplateError, parse_template

ISSUE_FORM = rb"""<template><var name="USPHONENUMBER">\d{3}-\d{4}</var><rule name="PhoneNumber"
class="rules.RegExpRule"><param name="pattern">${USPHONENUMBER}</param></rule>
<rule name="BFS" class="rules.BreadthFirstSearch"/></template>"""

PAGE = b"""<html><head><title>Northern Kentucky University</title></head><body>
<p>Welcome to   Northern Kentucky
University (NKU). Call (606) 572-5220 or 637-9948.</p>
<a href="/admissions/">Admissions</a> <a href="http://www.ky.gov/">KY</a> <a href="#top">top</a>
<script>var SECRET = "555-1234";</script></body></html>"""


def test_the_issues_template_form_loads_and_expands_variables():
    template = parse_template(ISSUE_FORM)
    assert [(s.name, s.cls.__name__) for s in template.specs] == [("PhoneNumber", "RegExpRule"),
                                                                  ("BFS", "BreadthFirstSearch")]
    assert template.specs[0].params == {"pattern": r"\d{3}-\d{4}"}


def test_variables_expand_inside_variables_and_parameters():
    template = parse_template(rb"""<template>
      <var name="USAREACODE">((\(\d{3}\))|(\d{3}))</var>
      <var name="USPHONENUMBER">\d{3}-\d{4}</var>
      <var name="PHONE">${USAREACODE}{0,1}(\s){0,1}(${USPHONENUMBER})</var>
      <rule name="PhoneNumber" class="rules.RegExpRule"><param name="pattern">${PHONE}</param></rule>
    </template>""")
    assert template.specs[0].params["pattern"] == r"((\(\d{3}\))|(\d{3})){0,1}(\s){0,1}(\d{3}-\d{4})"


@pytest.mark.parametrize(("body", "message"), [
    (b'<template><rule name="A" class="nowhere.Rule"/></template>', "cannot import module 'nowhere'"),
    (b'<template><rule name="A" class="rules.Nope"/></template>', "module 'rules' has no class 'Nope'"),
    (b'<template><rule name="A" class="rule_fixtures.NotARule"/></template>', "not a subclass of rules.Rule"),
    (b'<template><rule name="A" class="rules.RegExpRule"/></template>', "missing parameter 'pattern'"),
    (b'<template><rule name="A" class="rules.RegExpRule"><param name="pattern">(</param></rule></template>',
     "not a valid regular expression"),
    (b'<template><rule name="A" class="rules.RegExpRule"><param name="pattern">a</param>'
     b'<param name="colour">red</param></rule></template>', "unknown parameter 'colour'"),
    (b'<template><rule name="A" class="rules.RegExpRule"><param name="pattern">a</param>'
     b'<param name="trim">maybe</param></rule></template>', "expected true or false"),
    (b'<template><rule name="A" class="rules.RegExpRule"><param name="pattern">${NOPE}</param></rule></template>',
     "${NOPE} is not a declared variable"),
    (b'<template><rule name="A" class="rules.BreadthFirstSearch"/><rule name="A" class="rules.BreadthFirstSearch"/>'
     b'</template>', "duplicate"),
    (b'<template><rule class="rules.BreadthFirstSearch"/></template>', "name"),
    (b"<template><rule", "not well-formed"),
])
def test_bad_templates_are_refused_with_file_line_and_reason(body, message):
    with pytest.raises(TemplateError) as caught:
        parse_template(body, "t.xml")
    assert message.lower() in str(caught.value).lower()
    assert all(p.startswith("t.xml:") for p in caught.value.problems)


def test_regexprule_matches_the_text_with_squeeze_and_trim():
    doc = Doc("http://www.nku.edu/", 1, PAGE)
    name = RegExpRule("UniversityName", {"pattern": r"([A-Z][A-Za-z]*\s+)+University", "squeezedoc": "true",
                                         "unique": "true"})
    assert list(name.process_doc(doc)) == ["Northern Kentucky University"]
    raw = RegExpRule("Raw", {"pattern": r"Northern\s+Kentucky\s+University"})
    assert list(raw.process_doc(doc))[1] == "Northern Kentucky\nUniversity"  # the text as in the page
    squeezed = RegExpRule("S", {"pattern": r"Northern\s+Kentucky\s+University", "squeezematch": "true"})
    assert list(squeezed.process_doc(doc))[1] == "Northern Kentucky University"
    phone = RegExpRule("PhoneNumber", {"pattern": r"((\(\d{3}\))|(\d{3})){0,1}(\s){0,1}(\d{3}-\d{4})",
                                       "trim": "true"})
    assert list(phone.process_doc(doc)) == ["(606) 572-5220", "637-9948"]  # not the script's
    acronym = RegExpRule("Acronym", {"pattern": r"\b[A-Z][A-Z]+\b", "group": "0"})
    assert list(acronym.process_doc(doc)) == ["NKU", "KY"]  # link text is text too


def test_doc_separates_tags_and_text_and_resolves_links():
    doc = Doc("http://www.nku.edu/", 1, PAGE)
    assert [t.name for t in doc.tags][:4] == ["html", "head", "title", "body"]
    assert doc.tags[-2].name == "a" and doc.tags[-2].attrs == {"href": "#top"}
    assert "SECRET" not in doc.text and "Welcome" in doc.text and "<p>" not in doc.text
    assert doc.links == ["http://www.nku.edu/admissions/", "http://www.ky.gov/"]
    assert Doc("http://x.test/", 1, b"\xff\xfe\x00garbage").text is not None  # never raises


@pytest.fixture(params=["sqlite", "redis"])
def results_store(request, tmp_path):
    if request.param == "sqlite":
        store = SqliteResultsStore(tmp_path / "results.sqlite")
        yield store
        store.close()
        return
    yield RedisResultsStore(*redis_space(request))


def test_results_store_keeps_results_by_rule_and_document_with_stable_seqs(results_store):
    a, b = results_store.seq("http://a.test/"), results_store.seq("http://b.test/")
    assert (a, b) == (1, 2) and results_store.seq("http://a.test/") == 1
    results_store.put("R", "http://b.test/", b, ["x"], 1)
    results_store.put("R", "http://a.test/", a, [], 1)
    results_store.put("Q", "http://a.test/", a, [{"k": 1}], 1)
    assert results_store.get("R", "http://a.test/") == [] and results_store.get("R", "http://c.test/") is None
    assert list(results_store.rows("R")) == [("R", "http://a.test/", 1, []), ("R", "http://b.test/", 2, ["x"])]
    assert results_store.rules() == ["Q", "R"] and len(list(results_store.rows())) == 3
    results_store.put("R", "http://b.test/", b, ["y"], 2)  # a later crawl replaces
    assert results_store.get("R", "http://b.test/") == ["y"]


def engine_for(template_xml: bytes, store_path):
    return RuleEngine(parse_template(template_xml), lambda: SqliteResultsStore(store_path))


RULES = b"""<template>
  <rule name="Visits" class="rule_fixtures.Visits"/>
  <rule name="Nothing" class="rule_fixtures.Nothing"/>
  <rule name="Boom" class="rule_fixtures.Boom"/>
  <rule name="CountVisits" class="rule_fixtures.ReadsOther"><param name="other">Visits</param></rule>
  <rule name="Totals" class="rule_fixtures.Totals"/>
</template>"""


def test_engine_runs_every_rule_records_empty_results_and_survives_a_failing_rule(tmp_path):
    engine = engine_for(RULES, tmp_path / "r.sqlite")
    outcome = engine.process("http://a.test/", PAGE)
    assert [(r.rule, r.results) for r in outcome.results][1:] == [("Nothing", []), ("CountVisits", [1]),
                                                                   ("Totals", [])]
    assert outcome.errors == 1 and engine.stats["rules/errors"] == 1
    engine.process("http://b.test/", PAGE)
    assert [r.rule for r in engine.close()] == ["Totals"]
    with SqliteResultsStore(tmp_path / "r.sqlite") as store:
        assert store.get("Totals", "") == [{"documents": 2}]
        assert store.get("Boom", "http://a.test/") is None  # failed: not recorded, unlike "found nothing"
        assert store.get("Nothing", "http://a.test/") == []
    again = engine_for(RULES, tmp_path / "r.sqlite")  # the next crawl reloads the table
    assert again.process("http://a.test/", PAGE).results[0].results[0]["seen_before"] is True


def test_results_are_json_whatever_the_rule_returns():
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int

    assert as_results(None) == [] and as_results("one") == ["one"] and as_results({"a": 1}) == [{"a": 1}]
    assert as_results(Point(1)) == [{"x": 1}] and as_results(iter([1, (2, 3)])) == [1, [2, 3]]
    assert as_results([object()])[0].startswith("<object object")


PATTERNS = [r"\b[A-Z][A-Z]+\b", r"((\(\d{3}\))|(\d{3})){0,1}(\s){0,1}(\d{3}-\d{4})", r"\w+@\w+\.\w{2,3}",
            r"(University\s+of\s+([A-Z][A-Za-z]*\s+)+)|(([A-Z][A-Za-z]*\s+)+University)", r"[^aeiou\s]{3,}",
            r"(?i)the\s+\w+", r"\d+(\.\d+)?", r"^\w+", r"\w+$", r"a|ab|abc", r"(x)?y", r".{5}"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regexprule_gives_pythons_answers_whichever_engine_runs(pattern):
    import random

    rng = random.Random(pattern)
    alphabet = "aeiouxyzbcdABCDEUTH0123456789 .-@()\t\n"
    for _ in range(30):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        page = f"<html><body><p>{text}</p></body></html>".encode()
        auto = RegExpRule("A", {"pattern": pattern, "maxresults": "100000"})
        python = RegExpRule("P", {"pattern": pattern, "engine": "re", "maxresults": "100000"})
        assert auto.fast is not None  # RE2 takes every one of these
        doc = Doc("http://a.test/", 1, page)
        assert list(auto.process_doc(doc)) == list(python.process_doc(doc))


def test_non_ascii_text_and_re2_refused_patterns_fall_back_to_python():
    doc = Doc("http://a.test/", 1, "<p>ÉCOLE and NKU</p>".encode())
    assert list(RegExpRule("A", {"pattern": r"\b[A-Z][A-Z]+\b"}).process_doc(doc)) == ["NKU"]  # not "COLE"
    backref = RegExpRule("B", {"pattern": r"(\w)\1"})
    assert backref.fast is None and list(backref.process_doc(Doc("u", 1, b"<p>book</p>"))) == ["oo"]
