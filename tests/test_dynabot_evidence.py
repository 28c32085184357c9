"""Evidence that an answer depends on the query (webrace.dynabot.evidence): the control probe's
value, echoes set aside, and the judgement, on answers saved from real applications
(tests/fixtures/forms/) and real BLAST+ reports (tests/fixtures/blast/)."""

from __future__ import annotations

import random
from html import escape
from pathlib import Path

import pytest

from scd import load_scd
from webrace.dynabot.evidence import MASK, Answer, judge, mask_in_tags, mask_shared, nonsense, page_results_only

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "tests" / "fixtures" / "forms"
BLAST = ROOT / "tests" / "fixtures" / "blast"
KEYWORDS = load_scd(ROOT / "serviceclasses" / "keyword_search.xml")
NUCLEOTIDE = load_scd(ROOT / "serviceclasses" / "nucleotide_blast.xml")
RESULTS = KEYWORDS.controlflow.vertices["results"]
SUMMARY = NUCLEOTIDE.controlflow.vertices["summary"]


def page(name: str) -> str:
    return (FORMS / f"{name}.html").read_text(encoding="utf-8")


def keyword_answer(name: str, word: str) -> Answer:
    return Answer(page(name), {"keywords": word})


# -- the control probe's value ------------------------------------------------------------------------


def test_a_nonsense_word_is_long_made_of_the_words_letters_and_not_the_word():
    rng = random.Random(7)
    for word in ("wiki", "library", "crawler"):
        made = nonsense(word, rng)
        assert len(made) >= 10 and made.isalpha() and word not in made.lower()
        assert set(made) <= set(word) | set("qxz")


def test_a_nonsense_sequence_stays_a_sequence_of_the_argument_type():
    sequence = next(a for a in NUCLEOTIDE.examples[0].arguments if a.name == "sequence")
    fits = lambda value: NUCLEOTIDE.recognizer().is_instance(sequence.type, value)  # noqa: E731
    made = nonsense(sequence.value, random.Random(1), fits)
    assert fits(made) and made != sequence.value and len(made) == len(sequence.value)


def test_a_fasta_query_keeps_its_defline_and_its_bases():
    made = nonsense(">query\nACGTTGCAACGT\nTTGACCAGT\n", random.Random(3))
    defline, first, second = made.split("\n")[:3]
    assert defline.startswith(">") and set(defline[1:]) <= set("query")
    assert set(first + second) <= set("ACGT") and len(first) == 12 and len(second) == 9


def test_the_control_value_is_the_same_for_the_same_seed():
    assert nonsense("library", random.Random(5)) == nonsense("library", random.Random(5))


# -- echoes -------------------------------------------------------------------------------------------


def test_the_query_inside_links_scripts_and_the_search_box_is_masked_and_page_text_is_not():
    markup = ('<title>wiki - Search</title><input name="q" value="wiki"><script>var q = "wiki";</script>'
              '<!-- wiki --><a href="/search?q=wiki&page=2">next</a><p>The wiki holds pages.</p>')
    masked = mask_in_tags(markup, ["wiki"])
    assert masked.count("wiki") == 1 and "The wiki holds" in masked and MASK in masked
    assert len(masked) == len(markup)


def test_text_both_answers_show_around_their_own_word_is_masked():
    hit = '<h3>490 rows where search matches "library" sorted by name</h3><p>a shared library for X</p>'
    control = '<h3>0 rows where search matches "zqxjvbw" sorted by name</h3><p>Nothing</p>'
    masked = mask_shared(hit, ["library"], control, ["zqxjvbw"])
    assert "matches \"library\"" not in masked and "shared library for" in masked


# -- the judgement, on real answers --------------------------------------------------------------------


def test_datasettes_full_text_search_is_backed_by_its_zero_rows_answer():
    evidence = judge(KEYWORDS, RESULTS, keyword_answer("datasette_fts_hit", "library"),
                     keyword_answer("datasette_fts_nonsense", "zqxjvbw"))
    assert evidence.backed and "0 rows" in evidence.no_results


def test_datasettes_zero_rows_answer_with_the_word_in_its_links_is_no_hit():
    # the false match: 0 rows, and 15 "results" that were links repeating the query
    evidence = judge(KEYWORDS, RESULTS, keyword_answer("datasette_fts_nonsense", "zqxjvbw"),
                     keyword_answer("datasette_fts_hit", "library"))
    assert not evidence.backed


def test_a_filter_the_server_dropped_answers_the_whole_table_and_the_claim_is_blocked():
    evidence = judge(KEYWORDS, RESULTS, keyword_answer("datasette_plain_nocolumn_hit", "library"),
                     keyword_answer("datasette_plain_nocolumn_nonsense", "zqxjvbw"))
    assert not evidence.backed and "do not depend on it" in evidence.reason


def test_a_filter_with_its_column_set_is_backed():
    evidence = judge(KEYWORDS, RESULTS, keyword_answer("datasette_plain_column_hit", "library"),
                     keyword_answer("datasette_plain_column_nonsense", "zqxjvbw"))
    assert evidence.backed


def test_tracs_search_is_backed_by_no_matches_found():
    evidence = judge(KEYWORDS, RESULTS, keyword_answer("trac_search_hit", "wiki"),
                     keyword_answer("trac_search_nonsense", "zqxjvbw"))
    assert evidence.backed and evidence.no_results == "No matches found"


def engine(word: str) -> str:
    """A search page that lists five results holding whatever it was asked."""
    items = "".join(f'<li><a href="/doc/{n}">Title {n}</a><p>{n} of many pages on {escape(word)}</p></li>'
                    for n in range(5))
    return f"<p>Results for <b>{escape(word)}</b></p><ol>{items}</ol>"


def test_a_nonsense_probe_that_gets_results_like_the_hits_blocks_the_claim():
    evidence = judge(KEYWORDS, RESULTS, Answer(engine("crawler"), {"keywords": "crawler"}),
                     Answer(engine("rrlcweaqzx"), {"keywords": "rrlcweaqzx"}))
    assert not evidence.backed and "echo" in evidence.reason


# -- BLAST: no {arg:} in its types; "No hits found" is what a nonsense sequence gets -------------------


def blast_answer(name: str) -> Answer:
    return Answer((BLAST / name).read_text(), {"sequence": "ACGT"})


@pytest.mark.parametrize("nohits", ["blastn_nohits.txt", "blastn_nohits.html"])
def test_a_blast_report_is_backed_by_no_hits_for_the_nonsense_sequence(nohits):
    evidence = judge(NUCLEOTIDE, SUMMARY, blast_answer("blastn.txt"), blast_answer(nohits))
    assert evidence.backed and "No hits found" in evidence.no_results


def test_the_same_report_for_the_nonsense_sequence_blocks_the_claim():
    evidence = judge(NUCLEOTIDE, SUMMARY, blast_answer("blastn.txt"), blast_answer("blastn.txt"))
    assert not evidence.backed and "does not depend" in evidence.reason


def test_an_empty_report_is_a_claim_the_class_makes_for_itself():
    evidence = judge(NUCLEOTIDE, SUMMARY, blast_answer("blastn_nohits.txt"), blast_answer("blastn_nohits.txt"))
    assert evidence.backed


HEADER = ('<div class="related"><a href="{home}">Lantern 3.1 Documentation</a> | '
          '<a href="about.html">About the lantern docs</a></div>')


def test_an_answer_whose_only_results_are_the_form_pages_own_links_is_the_sites_menus():
    """Sent a word of the site's header, an answer still to be written by its scripts shows only
    the header's links (linking home as "index.html" where the home page says "#")."""
    vertex = KEYWORDS.controlflow.vertices["results"]
    home = "<html><body>" + HEADER.format(home="#") + "<p>Welcome.</p></body></html>"
    empty = "<html><body>" + HEADER.format(home="index.html") + '<div id="results"></div></body></html>'
    found = empty.replace('<div id="results"></div>', '<ul><li><a href="wick.html">Wicks</a> for a lantern</li>'
                                                       '<li><a href="oil.html">Oil</a> for a lantern</li></ul>')
    assert page_results_only(KEYWORDS, vertex, empty, home, {"keywords": "lantern"})
    assert not page_results_only(KEYWORDS, vertex, found, home, {"keywords": "lantern"})
    assert not page_results_only(KEYWORDS, vertex, empty, home, {"keywords": "wick"})  # no result at all


# Python's documentation as its search page shows it once searchtools.js ran (Debian's
# python3.11-doc, rendered in Chromium; scripts, styles and the sidebar aside): its header and
# footer hold "python" in links and after them, on every answer, the nonsense probe's too.
SPHINX_CHROME = """<!DOCTYPE html><html lang="en"><head><title>Search &#8212; Python 3.11.2 documentation</title></head>
<body><div class="related" role="navigation"><h3>Navigation</h3><ul>
<li class="right"><a href="genindex.html" title="General Index" accesskey="I">index</a></li>
<li class="right"><a href="py-modindex.html" title="Python Module Index">modules</a> |</li>
<li><img src="_static/py.svg" alt="python logo"></li><li><a href="https://www.python.org/">Python</a> &#187;</li>
<li id="cpython-language-and-version"><a href="index.html">3.11.2 Documentation</a> &#187;</li>
<li class="nav-item nav-item-this"><a href="">Search</a></li></ul></div>
<div class="body" role="main"><h1 id="search-documentation">Search</h1>
<form action="" method="get"><input type="text" name="q" value="{word}"><input type="submit" value="search"></form>
<div id="search-results"><h2>{heading}</h2>{answer}</div></div>
<div class="footer">&#169; <a href="copyright.html">Copyright</a> 2001-2026, Python Software Foundation.<br>
This page is licensed under the Python Software Foundation License Version 2.<br>
See <a href="/license.html">History and License</a> for more information.</div></body></html>"""

SPHINX_RESULTS = ('<p class="search-summary">Search finished, found 3 pages matching the search query.</p>'
                  '<ul class="search">'
                  '<li><a href="tutorial/index.html?highlight={word}" data-score="15">The Python Tutorial</a>'
                  '<p class="context">Python is an easy to learn, powerful programming language.</p></li>'
                  '<li><a href="using/cmdline.html?highlight={word}" data-score="12">1. Command line and '
                  'environment</a><p class="context">The CPython interpreter scans the command line.</p></li>'
                  '<li><a href="faq/general.html?highlight={word}" data-score="9">General Python FAQ</a></li></ul>')


def sphinx(word: str, answer: str, heading: str = "Search Results") -> str:
    return SPHINX_CHROME.replace("{word}", word).replace("{heading}", heading).replace(
        "{answer}", answer.replace("{word}", word))


def test_an_answer_and_a_control_that_share_chrome_holding_the_word_are_judged_on_the_results():
    """Sent "python" (a word of the header and footer, which alone make a result list), the
    chrome both answers show is set aside, and what is left is searchtools.js' list; the
    nonsense probe's answer ("did not match any documents") backs it. Read too early, while the
    scripts still search, the hit has only the chrome: no claim."""
    control = Answer(sphinx("ytnpnpyqpn", '<p class="search-summary">Your search did not match any '
                                          'documents.</p><ul class="search"></ul>'), {"keywords": "ytnpnpyqpn"})
    hit = Answer(sphinx("python", SPHINX_RESULTS), {"keywords": "python"})
    evidence = judge(KEYWORDS, RESULTS, hit, control)
    assert evidence.backed and evidence.no_results == "did not match any", evidence
    early = Answer(sphinx("python", '<span id="search-progress">Searching</span>', heading=""), {"keywords": "python"})
    assert page_results_only(KEYWORDS, RESULTS, early.markup, sphinx("", ""), early.values)
    blocked = judge(KEYWORDS, RESULTS, early, control)
    assert not blocked.backed and "set aside" in blocked.reason
