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
from webrace.dynabot.values import answer_words, parse_values, site_words, vary, with_value

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


# -- words of the answers ---------------------------------------------------------------------------

BARE = ('<html><body><h1>Omega Search</h1><form action="/s"><input name="P"><input type="submit"></form>'
        '<p>Searching 1,029 documents</p></body></html>')
NOTHING = BARE.replace("<p>Searching", "<p>No documents match your query. Popular searches: lantern walk, "
                       "lantern glass, lantern oil; searching documents.</p><p>Searching")


def test_an_answers_words_are_those_it_shows_and_the_start_page_does_not():
    assert answer_words(NOTHING, BARE, 2) == ["lantern"]  # "documents", "searching" are the page's own
    assert answer_words(NOTHING, BARE, 2, exclude=["lantern"]) == []
    assert answer_words(BARE, BARE, 2) == [] and answer_words(NOTHING, BARE, 0) == []


def test_a_word_of_an_answer_replaces_the_typed_in_value_when_the_arguments_type_takes_it():
    (probe,) = plan_probes(analyze_forms(BARE, "http://127.0.0.1:8003/"), KEYWORDS)
    changed = with_value(probe, KEYWORDS, {"keywords"}, "lantern", "a word of an answer")
    assert changed.assignment["P"] == "lantern" and changed.why.endswith("P='lantern' (a word of an answer)")
    again = with_value(changed, KEYWORDS, {"keywords"}, "glass", "a word of an answer")
    assert again.why.count("P=") == 1 and again.assignment["P"] == "glass"
    assert with_value(probe, KEYWORDS, {"other"}, "lantern", "x") is None  # not an argument the results echo
    assert with_value(probe, KEYWORDS, {"keywords"}, "two\nlines", "x") is None  # not a Keywords


class Bare:
    """A search whose start page shows no word of its documents and whose "nothing found" answer
    names popular searches (words of its documents), on a free port of 127.0.0.1."""

    DOCS = {"/d1": "The lantern walk", "/d2": "Lantern glass and lantern oil", "/d3": "Lantern parts"}

    def __init__(self) -> None:
        import threading
        from html import escape
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.queries: list[str] = []
        bare = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                parts = urlsplit(self.path)
                if parts.path == "/s":
                    word = parse_qs(parts.query).get("P", [""])[0]
                    bare.queries.append(word)
                    found = [(u, t) for u, t in Bare.DOCS.items() if word and word.lower() in t.lower()]
                    listed = "".join(f'<p><a href="{u}">{escape(t)}</a></p>' for u, t in found)
                    body = BARE.replace("<p>Searching", listed + "<p>Searching") if found else NOTHING
                else:
                    body = BARE
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_bare_search_page_is_probed_with_a_word_its_nothing_found_answer_shows(project):
    """"crawler" finds nothing, the start page has no word to borrow; the answer names popular
    searches: "lantern", a word of theirs, is tried before the class's last-resort values."""
    import json

    site = Bare()
    try:
        project.write("seeds.txt", site.url + "\n")
        out = project.root / "out.jsonl"
        done = project.scrapy("crawl", "dynabot", "-a", f"scd={ROOT / 'serviceclasses' / 'keyword_search.xml'}",
                              "-a", "seeds=seeds.txt", "-O", str(out), "-s", "DOWNLOAD_DELAY=0",
                              "-s", "WEBRACE_DELAY_FACTOR=0", "-s", "WEBRACE_DYNABOT_BROWSER=False", timeout=300)
    finally:
        site.close()
    assert done.returncode == 0, done.stderr[-3000:]
    items = {item["kind"]: item for item in map(json.loads, out.read_text().splitlines())}
    assert items["trace"]["outcome"] == "match", items["trace"]
    assert ["P", "lantern"] in items["profile"]["fields"]
    assert site.queries[:2] == ["crawler", "lantern"] and "example" not in site.queries
    assert items["trace"]["steps"][0]["words"] == ["lantern"]
    assert "(a word of an answer)" in items["trace"]["steps"][1]["why"]
