"""Forms as people fill them: probe values from the command line, the class and the site's own
words (webrace.dynabot.values), and filter rows with their column and operator set
(analyzer.filter_settings); on real forms saved from real applications (tests/fixtures/forms/)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from scd import SCDError, load_scd
from webrace.dynabot.analyzer import filter_settings, plan_probes
from webrace.dynabot.forms import analyze_forms, form_request
from webrace.dynabot.values import parse_values, site_words, vary

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "tests" / "fixtures" / "forms"
KEYWORDS = load_scd(ROOT / "serviceclasses" / "keyword_search.xml")
NUCLEOTIDE = load_scd(ROOT / "serviceclasses" / "nucleotide_blast.xml")


def real_forms(page: str, url: str = "http://127.0.0.1:8001/packages_plain/packages"):
    return analyze_forms((FORMS / f"{page}.html").read_bytes(), url)


def sent(probe) -> dict[str, list[str]]:
    request = form_request(probe.form, probe.assignment, button=probe.button)
    return parse_qs(urlsplit(request.url).query, keep_blank_values=True)


# -- filter rows --------------------------------------------------------------------------------------


def test_a_filter_form_with_a_column_select_is_probed_with_the_column_and_operator_set():
    """Datasette's table without full-text search: its only text box is the filter's value; left
    with "- column -" and "=", datasette drops the filter and answers the whole table."""
    first, *others = plan_probes(real_forms("datasette_plain"), KEYWORDS)
    query = sent(first)
    assert query["_filter_value"] == ["crawler"]
    assert query["_filter_column"] == ["description"] and query["_filter_op"] == ["contains"]
    assert query["_sort"] == ["name"]  # the other defaults are kept
    assert [sent(p)["_filter_column"] for p in others] == [["summary"], ["name"]]  # other columns after
    assert "its default '- column -' applies none" in first.why and "'=' compares whole values" in first.why


def test_a_search_box_beside_a_filter_row_leaves_the_filter_as_it_is():
    first = plan_probes(real_forms("datasette_fts", "http://127.0.0.1:8001/packages/packages"), KEYWORDS)[0]
    query = sent(first)
    assert query["_search"] == ["crawler"] and query["_filter_column"] == [""] and query["_filter_value"] == [""]


def test_a_select_whose_default_is_sensible_keeps_it():
    form = analyze_forms('<form action="/s"><input name="q"><select name="field"><option value="">Any field'
                         '</option><option>title</option></select><select name="st"><option>commit</option>'
                         '<option>grep</option></select></form>', "http://site.test/")[0]
    q = next(p for p in form.parameters if p.name == "q")
    assert filter_settings(form, q, {"q"}) == []
    gitweb = real_forms("gitweb", "http://127.0.0.1:8005/cgi-bin/gitweb.cgi")[0]
    s = next(p for p in gitweb.parameters if p.name == "s")
    assert filter_settings(gitweb, s, {"s"}) == []  # search type "commit" kept


# -- probe values ---------------------------------------------------------------------------------


def test_command_line_values_go_to_the_argument_they_name_or_to_every_typed_one():
    values, problems = parse_values(KEYWORDS, {"keywords": "library, socket"})
    assert values == {"keywords": ["library", "socket"]} and problems == []
    values, problems = parse_values(KEYWORDS, {"probe": "wiki"})
    assert values == {"keywords": ["wiki"]} and problems == []


@pytest.mark.parametrize(("given", "problem"), [
    ({"keyword": "x"}, "'keyword' is no argument of the service class; typed-in arguments: keywords"),
    ({"keywords": " , "}, "-a keywords=: no value given"),
    ({"keywords": ",".join(["w"] * 11)}, "at most 10 values"),
    ({"keywords": "x" * 1001}, "at most 10 values of 1000 characters"),
])
def test_bad_command_line_values_are_one_line_each(given, problem):
    values, problems = parse_values(KEYWORDS, given)
    assert values == {} and len(problems) == 1 and problem in problems[0]


def test_a_value_that_is_not_of_the_arguments_type_is_refused_by_name():
    _, problems = parse_values(NUCLEOTIDE, {"sequence": "library"})
    assert problems == ["-a sequence=library: not an instance of the argument's type 'DNASequence'"]
    _, problems = parse_values(NUCLEOTIDE, {"database": "nt"})
    assert "'database' is chosen among a form's options" in problems[0]


def test_site_words_are_the_pages_frequent_content_words_not_its_menus():
    assert site_words((FORMS / "trac_wikistart.html").read_text(), 2) == ["trac", "wiki"]
    words = site_words((FORMS / "gitweb.html").read_text(), 3)
    assert "commitdiff" not in words and "tree" not in words  # gitweb's one-word action links
    assert site_words("<p>Crawler crawler crawler</p>", 2, exclude=["crawler"]) == []
    assert site_words("<p>once only</p>", 2) == []


def test_each_planned_probe_gets_the_command_lines_values_the_class_the_sites_words_then_the_class_again():
    plan = plan_probes(real_forms("trac_wikistart", "http://127.0.0.1:8002/"), KEYWORDS)
    varied = vary(plan, KEYWORDS, {"keywords": ["wiki"]}, ["trac", "crawler", "Not A Word!"])
    assert [p.assignment["q"] for p in varied] == ["wiki", "crawler", "trac", "Not A Word!", "example", "information"]
    assert "from -a keywords" in varied[0].why and "a word of the site" in varied[2].why
    assert "the class's next value" in varied[4].why


def test_a_classs_further_values_must_be_of_the_arguments_type():
    text = (ROOT / "serviceclasses" / "keyword_search.xml").read_text().replace(
        "<value>information</value>", "<value>  </value><value>two\nlines</value>")  # a Keywords value is one line
    with pytest.raises(SCDError, match=r"value 'two\\nlines' is not an instance of type 'Keywords'"):
        load_scd(text.encode())


def test_site_words_that_are_not_of_the_arguments_type_are_not_tried():
    page = '<form method="post" action="/b"><textarea name="sequence"></textarea></form>'
    plan = plan_probes(analyze_forms(page, "http://site.test/"), NUCLEOTIDE)
    varied = vary(plan, NUCLEOTIDE, {}, ["library", "socket"])
    assert {p.assignment["sequence"] for p in varied} == {p.assignment["sequence"] for p in plan}
