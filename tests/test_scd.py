"""Service class descriptions (scd/): loading and validation, the type system, the
recogniser, and the service classes shipped in serviceclasses/."""

from __future__ import annotations

import re
from pathlib import Path

import lxml.html
import pytest
import re2

from scd import SCDError, ServiceClass, TypeCompiler, is_form_type, load_scd
from scd.types import FALLBACK_MAX_TEXT, escape_value, translate_pattern

SERVICECLASSES = Path(__file__).parent.parent / "serviceclasses"
RE2_TYPE = type(re2.compile("a"))

# An NCBI-style nucleotide BLAST report, as the task describes it (plain text inside <pre>).
ALIGNMENT = """>gi|12345|gb|AF123456.1| Homo sapiens clone XYZ mRNA
          Length = 1520

 Score = 38.2 bits (19), Expect = 0.003
 Identities = 19/19 (100%)
 Strand = Plus / Plus

Query: 280 TGGCAGGCGTCCTGCTTTA 298
           |||||||||||||||||||
Sbjct: 1   TGGCAGGCGTCCTGCTTTA 19
"""

NEWER_ALIGNMENT = """> gi|67890|ref|NM_000518.5| Homo sapiens hemoglobin subunit beta (HBB), mRNA
Length=626

 Score = 1093 bits (592),  Expect(2) = 0.0
 Identities = 592/592 (100%), Gaps = 0/592 (0%)
 Strand=Plus/Plus

Query  1    ACATTTGCTTCTGACACAACTGTGTTCACTAGCAACCTCAAACAGACACCATGGTGCATC  60
            ||||||||||||||||||||||||||||||||||||||||||||||||||||||||||||
Sbjct  51   ACATTTGCTTCTGACACAACTGTGTTCACTAGCAACCTCAAACAGACACCATGGTGCATC  110

Query  61   TGACTCCTGAGGAGAAGTCTGCCGTTACTGCCCTGTGGGGCAAGGTGAACGTGGATGAAG  120
            |||||||||||||||||||||||||||||||||||| |||||||||||||||||||||||
Sbjct  111  TGACTCCTGAGGAGAAGTCTGCCGTTACTGCCCTGTAGGGCAAGGTGAACGTGGATGAAG  170
"""

PROTEIN_ALIGNMENT = """>sp|P01308|INS_HUMAN Insulin OS=Homo sapiens
          Length = 110

 Score = 52.4 bits (124), Expect = 2e-07
 Identities = 30/45 (66%), Positives = 35/45 (77%)

Query: 1   MALWMRLLPLLALLALWGPDPAAAFVNQHLCGSHLVEALYLVCGERG 47
           MALWMRLLPLLALLALWGPDPAAA VNQHLCG+HLVEALYLVCGERG
Sbjct: 1   MALWMRLLPLLALLALWGPDPAAAFVNQHLCGAHLVEALYLVCGERG 47
"""


def html_report(*alignments: str) -> str:
    """A results page as a BLAST server writes it: subject ids hyperlinked, ">" escaped."""
    body = []
    for text in alignments:
        text = re.sub(r"^>( ?)(\S+)", r'&gt;\1<a href="http://www.ncbi.example/entrez?uid=1">\2</a>', text, flags=re.M)
        body.append(f"<pre>\n{text}</pre>\n")
    return (
        "<html><head><title>BLAST Search Results</title></head><body>\n"
        '<a href="/">Home</a> | <a href="/blast/">BLAST</a>\n'
        "<pre>Sequences producing significant alignments:          (bits) Value\n\n"
        '<a href="#1">gi|12345|gb|AF123456.1|</a> Homo sapiens clone XYZ mRNA   38   0.003\n</pre>\n'
        + "".join(body)
        + "</body></html>\n"
    )


def page_text(html: str) -> str:
    return lxml.html.fromstring(html).text_content()


EMPTY_REPORT = (
    "<html><body><h1>BLASTN 2.2.6</h1>\n<pre>Query= my sequence\n         (60 letters)\n\n"
    "Database: nr\n\n<b>***** No hits found ******</b>\n\n</pre></body></html>\n"
)


@pytest.fixture(scope="module")
def blastn() -> ServiceClass:
    return load_scd(SERVICECLASSES / "nucleotide_blast.xml")


@pytest.fixture(scope="module")
def blastp() -> ServiceClass:
    return load_scd(SERVICECLASSES / "protein_blast.xml")


@pytest.fixture(scope="module")
def keyword_search() -> ServiceClass:
    return load_scd(SERVICECLASSES / "keyword_search.xml")


# -- loading -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nucleotide_blast.xml", "protein_blast.xml", "keyword_search.xml"])
def test_each_shipped_service_class_loads_and_compiles_every_type(name):
    sc = load_scd(SERVICECLASSES / name)
    assert sc.source.endswith(name)
    assert sc.controlflow.origins() and sc.controlflow.results() and sc.examples
    tc = sc.recognizer()
    for type_name in sc.types:
        assert tc.uses_re2(type_name, sc.examples[0].values()), type_name


def test_nucleotide_blast_has_appendix_a_graph_plus_format_and_running_vertices(blastn):
    flow = blastn.controlflow
    assert flow.name == "BLASTN"
    assert [v.name for v in flow.origins()] == ["start"]
    assert {v.name: v.type for v in flow.vertices.values()} == {
        "start": "HTMLform", "format": "HTMLform", "running": "ResultsLink", "summary": "SummaryPage"}
    assert (flow.vertices["summary"].result, flow.vertices["summary"].result_type) == (True, "Alignment")
    assert set(flow.edges) == {("start", "summary"), ("start", "format"), ("format", "summary"),
                               ("start", "running"), ("running", "summary"), ("format", "running")}
    assert [v.name for v in flow.successors("start")] == ["summary", "format", "running"]
    assert flow.successors("summary") == []


def test_nucleotide_blast_probing_templates_keep_appendix_a_arguments_and_hints(blastn):
    first, second = blastn.examples
    assert first.result_type == second.result_type == "SummaryPage"
    sequence, email, program, database = first.arguments
    assert (sequence.name, sequence.type, sequence.required, sequence.user) == ("sequence", "DNASequence", True, False)
    assert sequence.name_hints == ["[Ss]equence|SEQUENCE", "query_data|QUERY_DATA", "[Qq]uery|QUERY", "q|Q"]
    assert sequence.input_types == "textarea|TEXTAREA|text"
    assert (email.type, email.value, email.name_hints) == ("EmailAddress", "example@hotmail.com", ["email", "e-mail"])
    assert (program.type, program.value, program.input_types) == ("string", "blastn", None)
    assert (database.iterator, database.value) == (True, r".*[^\W]+.*")
    assert second.arguments[0].user is True


def test_a_sequence_value_broken_over_lines_loses_its_whitespace(blastn):
    first, second = (example.arguments[0].value for example in blastn.examples)
    assert first.startswith("CTGCATCAGTAATTTTAATAG") and first.endswith("AACACAACCATTCTA")
    assert len(first) == 340 and not re.search(r"\s", first)
    assert second == "AACTAATTGCCTCACATTGTCACTGCAAATCGACACCTA" \
                     "TTAATGGGTCTCACCTCCCAACTGCTTCCCCCTCTGTTCTTCCTGCTAGCATGTGCCGG"
    assert blastn.recognizer().is_instance("DNASequence", first)


def scd_file(tmp_path, types="", vertex_type="Word", destination="end", hint="w", value="abc",
             pattern="[a-z]+", extra_vertex="", argument_type="Word", result_type="Word") -> Path:
    """A small SCD with one type Word, written to tmp_path/t.xml; the parts vary per test."""
    path = tmp_path / "t.xml"
    path.write_text(f"""<serviceclass name="t">
  <types>
    <type name="Word" type="string" pattern="{pattern}"/>
    {types}
  </types>
  <controlflow name="t">
    <vertices>
      <vertex name="start" type="HTMLform" origin="true"/>
      <vertex name="end" type="{vertex_type}" result="true"/>
      {extra_vertex}
    </vertices>
    <edges>
      <edge origin="start" destination="{destination}"/>
    </edges>
  </controlflow>
  <examples>
    <example>
      <arguments>
        <argument required="true">
          <name>w</name>
          <type>{argument_type}</type>
          <hints><hint>{hint}</hint></hints>
          <value>{value}</value>
        </argument>
      </arguments>
      <result type="{result_type}"/>
    </example>
  </examples>
</serviceclass>
""")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(SCDError) as info:
        load_scd(path)
    return str(info.value)


def test_a_small_inline_service_class_loads(tmp_path):
    sc = load_scd(scd_file(tmp_path))
    assert (sc.name, list(sc.types), sc.examples[0].values()) == ("t", ["Word"], {"w": "abc"})


def test_load_scd_reads_bytes_too(tmp_path):
    sc = load_scd(scd_file(tmp_path).read_bytes())
    assert sc.source == "<bytes>" and sc.controlflow.vertices["end"].type == "Word"


def test_malformed_xml_is_refused_with_file_and_parser_line(tmp_path):
    path = scd_file(tmp_path, types='<type name="X">')
    assert re.match(rf"{re.escape(str(path))}:5: not well-formed XML: .*mismatch", load_error(path))


def test_schema_violation_is_refused_with_file_and_element_line(tmp_path):
    path = scd_file(tmp_path, types='<type name="X"><element type="Word" minOccurs="x"/></type>')
    assert re.match(rf"{re.escape(str(path))}:4: attribute minOccurs='x'.*", load_error(path))


def test_missing_xml_file_is_refused_with_its_name(tmp_path):
    assert load_error(tmp_path / "nope.xml") == f"{tmp_path / 'nope.xml'}: cannot read: No such file or directory"


def test_doctype_is_refused(tmp_path):
    path = tmp_path / "t.xml"
    path.write_text('<!DOCTYPE serviceclass [<!ENTITY x "y">]>\n<serviceclass/>')
    assert "DOCTYPE declarations" in load_error(path)


@pytest.mark.parametrize(("parts", "line", "reason"), [
    ({"types": '<type name="X"><element name="e" type="Nope"/></type>'}, 4,
     "type 'X': element 'e' refers to undefined type 'Nope'"),
    ({"types": '<type name="X" type="Nope"/>'}, 4, "type 'X' refers to undefined type 'Nope'"),
    ({"types": '<type name="X"><element type="Y"/></type><type name="Y" type="X"/>'}, 4,
     "type 'X' refers to itself: X -> Y -> X"),
    ({"types": '<type name="Word" pattern="a"/>'}, 4, "type 'Word' is already defined at line 3"),
    ({"types": '<type name="string" pattern="a"/>'}, 4, "type 'string' is built in and cannot be redefined"),
    ({"types": '<type name="X"><element type="HTMLform"/></type>'}, 4,
     "type 'X': element: HTMLform is recognised from a page's forms and cannot be part of a type"),
    ({"types": '<type name="X"><element type="Word" minOccurs="3" maxOccurs="2"/></type>'}, 4,
     "maxOccurs 2 is less than minOccurs 3"),
    ({"destination": "nowhere"}, 13, "edge start -> nowhere names unknown vertex 'nowhere'"),
    ({"destination": "start"}, 9, "result vertex 'end' cannot be reached from an origin"),
    ({"vertex_type": "Nope"}, 9, "vertex 'end': type refers to undefined type 'Nope'"),
    ({"extra_vertex": '<vertex name="end" type="Word"/>'}, 10, "vertex 'end' is already defined at line 9"),
    ({"argument_type": "Nope"}, 21, "argument 'w' refers to undefined type 'Nope'"),
    ({"argument_type": "HTMLform"}, 21, "argument 'w': type HTMLform describes pages, not values"),
    ({"result_type": "Nope"}, 26, "result refers to undefined type 'Nope'"),
    ({"hint": "(x"}, 22, "argument 'w': hint '(x': not a valid regular expression"),
    ({"value": "ABC"}, 23, "argument 'w': value 'ABC' is not an instance of type 'Word'"),
    ({"types": '<type name="X" pattern="{arg:zz}"/>'}, 4,
     "type 'X': pattern '{arg:zz}' refers to {arg:zz}, which no probing template defines"),
])
def test_semantic_errors_name_file_line_and_reason(tmp_path, parts, line, reason):
    path = scd_file(tmp_path, **parts)
    assert load_error(path).startswith(f"{path}:{line}: {reason}")


def test_bad_regex_in_an_element_names_the_pattern_file_and_line(tmp_path):
    path = scd_file(tmp_path, types='<type name="X">\n<element name="e" pattern="a(b"/></type>')
    message = load_error(path)
    assert message.startswith(f"{path}:5: type 'X': element 'e': pattern 'a(b': not a valid regular expression")


def test_bad_regex_in_an_atomic_type_names_the_pattern(tmp_path):
    path = scd_file(tmp_path, pattern="[a-")
    assert load_error(path).startswith(f"{path}:3: type 'Word': pattern '[a-': unterminated character class")


def test_backreferences_are_refused_because_types_are_regular(tmp_path):
    path = scd_file(tmp_path, types=r'<type name="X" pattern="(a)\1"/>')
    assert "backreferences (\\1) are not supported" in load_error(path)


def test_no_origin_and_no_result_vertex_are_refused(tmp_path):
    path = tmp_path / "t.xml"
    path.write_text("""<serviceclass>
  <types/>
  <controlflow name="t">
    <vertices><vertex name="a" type="string"/></vertices>
    <edges/>
  </controlflow>
  <examples><example><arguments/><result type="string"/></example></examples>
</serviceclass>""")
    message = load_error(path)
    assert f"{path}:3: control flow 't' has no origin vertex" in message
    assert f"{path}:3: control flow 't' has no result vertex" in message


def test_every_problem_of_a_file_is_reported(tmp_path):
    path = scd_file(tmp_path, destination="nowhere", hint="(x")
    assert len(load_error(path).splitlines()) == 3  # the edge, the unreachable result, the hint


# -- the type system -----------------------------------------------------------------------


def test_figure_2_posix_classes_recognise_an_alignment_sequence_fragment():
    from scd.types import Element, TypeDef

    fragment = TypeDef("AlignmentSequenceFragment", particles=(
        Element("AlignmentName", "string", "[:alpha:]+:"),
        Element(type="whitespace"),
        Element("start-align-pos", "integer"),
        Element(type="whitespace"),
        Element("Sequence", "DNASequence"),
        Element(type="whitespace"),
        Element("end-align-pos", "integer"),
    ))
    tc = TypeCompiler({"DNASequence": TypeDef("DNASequence", "string", "[GCATgcat-]+"),
                       fragment.name: fragment})
    match = tc.find("AlignmentSequenceFragment", "x\nQuery: 280 TGGCAGGCGTCCT 292\n")
    assert match.text == "Query: 280 TGGCAGGCGTCCT 292"
    assert match.elements["start-align-pos"] == ["280"] and match.elements["end-align-pos"] == ["292"]


@pytest.mark.parametrize(("pattern", "translated"), [
    ("[:alpha:]+:", "[a-zA-Z]+:"),
    ("[[:digit:][:space:]_]", r"[0-9\s_]"),
    ("(NONE|none)", "(?:NONE|none)"),
    ("(?P<x>a)b", "(?:a)b"),
    ("(?i)abc", "(?i:abc)"),
    ("a{2000}", "a{1000}"),
    ("a{,3}", "a{0,3}"),
    ("x{y", r"x\{y"),
    ("x{arg:k}y", "x\x00k\x00y"),
    (r"[\x22\x27]+", r"[\x22\x27]+"),
])
def test_patterns_translate_to_group_free_regexes_both_engines_read_alike(pattern, translated):
    assert translate_pattern(pattern) == translated


def test_argument_values_are_escaped_and_whitespace_runs_match_any_whitespace():
    assert escape_value(" deep  web.crawler ") == r"deep\s+web\x2ecrawler"
    assert re.fullmatch(escape_value("a+b (c)"), "a+b (c)")


def test_html_form_is_a_form_type_not_a_text_type(blastn):
    assert is_form_type("HTMLform") and not is_form_type("SummaryPage")
    assert not blastn.recognizer().is_instance("HTMLform", "<form></form>")
    with pytest.raises(ValueError, match="forms"):
        blastn.recognizer().find("HTMLform", "<form></form>")


def test_a_restriction_is_an_instance_only_if_its_base_type_is_too():
    from scd.types import TypeDef

    tc = TypeCompiler({"Code": TypeDef("Code", "integer", r"\d{3}|abc")})
    assert tc.is_instance("Code", "123") and not tc.is_instance("Code", "abc")


def test_occurs_become_quantifiers_capped_at_re2s_limit():
    from scd.types import Element, TypeDef

    tc = TypeCompiler({"Many": TypeDef("Many", particles=(Element(type="integer", min_occurs=2, max_occurs=5000),
                                                          Element(pattern=";", min_occurs=0)))})
    assert tc.pattern("Many").count("{2,1000}") == 1 and tc.uses_re2("Many")
    assert tc.is_instance("Many", "12") and not tc.is_instance("Many", "1;")


def test_landmarks_are_separated_from_their_neighbours_by_any_text():
    from scd.types import Element, TypeDef

    tc = TypeCompiler({"Pair": TypeDef("Pair", particles=(
        Element("a", pattern="A=\\d", compile=False), Element("b", pattern="B=\\d", compile=False)))})
    match = tc.find("Pair", "xx A=1 lots\nof text B=2 yy")
    assert (match.text, match.elements) == ("A=1 lots\nof text B=2", {"a": ["A=1"], "b": ["B=2"]})


def test_a_pattern_re2_refuses_runs_on_python_re_over_a_capped_text():
    from scd.types import TypeDef

    tc = TypeCompiler({"Ahead": TypeDef("Ahead", pattern="foo(?=bar)")})
    assert not tc.uses_re2("Ahead") and isinstance(tc.compiled("Ahead"), re.Pattern)
    assert tc.find("Ahead", "foobar").text == "foo"
    assert tc.find("Ahead", "x" * FALLBACK_MAX_TEXT + "foobar") is None


def test_find_all_returns_at_most_limit_matches(blastn):
    text = "Query: 280 TGGCAGGCGTCCT 292\n" * 50
    assert len(blastn.recognizer().find_all("AlignmentSequence", text, limit=7)) == 7
    assert len(blastn.recognizer().find_all("AlignmentSequence", text)) == 50


def test_a_type_with_an_argument_needs_the_probes_values(keyword_search):
    with pytest.raises(ValueError, match="needs the value of probing argument 'keywords'"):
        keyword_search.recognizer().find("SearchResult", "<a href='x'>y</a> z")


# -- the recogniser on the shipped classes -------------------------------------------------


def test_query_line_is_an_alignment_sequence_with_its_elements(blastn):
    match = blastn.recognizer().find("AlignmentSequence", "Query: 280 TGGCAGGCGTCCT 292")
    assert (match.type, match.start, match.end) == ("AlignmentSequence", 0, 28)
    assert match.elements == {"AlignmentName": ["Query:"], "m": ["280"], "Sequence": ["TGGCAGGCGTCCT"], "n": ["292"]}


def test_newer_blast_query_line_without_colon_is_an_alignment_sequence(blastn):
    match = blastn.recognizer().find("AlignmentSequence", "Query  280  TGGCAGGCGTCCT  292")
    assert match.elements["AlignmentName"] == ["Query"] and match.elements["n"] == ["292"]


@pytest.mark.parametrize("form", ["html", "text"])
def test_a_nucleotide_report_is_a_summary_page_of_alignments(blastn, form):
    page = html_report(ALIGNMENT, NEWER_ALIGNMENT)
    page = page if form == "html" else page_text(page)
    tc = blastn.recognizer()
    alignments = tc.find_all("Alignment", page)
    assert len(alignments) == 2
    assert alignments[0].elements["Evalue"] == ["Expect = 0.003"]
    assert alignments[0].elements["m"] == ["280", "1"] and alignments[0].elements["n"] == ["298", "19"]
    assert "gi|12345|gb|AF123456.1|" in alignments[0].elements["geneLink"][0]
    assert "gi|67890|ref|NM_000518.5|" in alignments[1].elements["geneLink"][0]
    assert alignments[1].elements["m"] == ["1", "51", "61", "111"]
    summary = tc.find("SummaryPage", page)
    assert summary is not None and len(summary.elements["Alignment"]) == 2
    assert summary.start == alignments[0].start and summary.end == alignments[1].end


def test_a_hyperlinked_subject_id_without_a_caret_starts_an_alignment_when_its_length_line_follows(blastn):
    page = html_report(ALIGNMENT).replace("&gt;<a", "<a")
    (alignment,) = blastn.recognizer().find_all("Alignment", page)
    assert alignment.elements["geneLink"][0].startswith('<a href="http://www.ncbi.example/entrez?uid=1">gi|12345|')


@pytest.mark.parametrize("form", ["html", "text"])
def test_an_empty_nucleotide_report_matches_summary_page_as_a_whole(blastn, form):
    page = EMPTY_REPORT if form == "html" else page_text(EMPTY_REPORT)
    tc = blastn.recognizer()
    match = tc.find("SummaryPage", page)
    assert (match.start, match.end) == (0, len(page))
    assert "No hits found" in match.elements["Message"][0]
    assert tc.is_instance("SummaryPage", page) and tc.is_instance("EmptyDNABLAST", page)


def test_a_page_without_results_is_not_a_summary_page(blastn):
    page = "<html><body><form><textarea name=sequence></textarea></form>Score = 1, Expect = 2</body></html>"
    assert blastn.recognizer().find("SummaryPage", page) is None


@pytest.mark.parametrize("form", ["html", "text"])
def test_a_protein_report_is_a_summary_page_of_protein_blast_only(blastn, blastp, form):
    page = html_report(PROTEIN_ALIGNMENT)
    page = page if form == "html" else page_text(page)
    assert blastn.recognizer().find("SummaryPage", page) is None
    match = blastp.recognizer().find("SummaryPage", page)
    assert match is not None
    assert match.elements["Sequence"] == ["MALWMRLLPLLALLALWGPDPAAAFVNQHLCGSHLVEALYLVCGERG",
                                          "MALWMRLLPLLALLALWGPDPAAAFVNQHLCGAHLVEALYLVCGERG"]


def test_a_nucleotide_report_is_not_a_protein_summary_page(blastp):
    assert blastp.recognizer().find("SummaryPage", html_report(ALIGNMENT, NEWER_ALIGNMENT)) is None
    assert not blastp.recognizer().is_instance("ProteinSequence", "ACGTNACGTTTGCA")


def test_a_running_page_links_to_the_results(blastn):
    tc = blastn.recognizer()
    assert tc.find("ResultsLink", '<p>Running...</p><a href="/cgi/blast_results?RID=42&amp;CMD=Get">here</a>')
    assert tc.find("ResultsLink", '<A HREF="/cgi/q?id=42">View RESULTS</A>')
    assert tc.find("ResultsLink", '<a href="/help.html">Help</a>') is None


SEARCH_PAGE = """<html><body><form action="/search"><input name="q" value="crawler"></form>
<ol>
<li><a href="http://a.example/">The Web crawler</a><div>A web <b>Crawler</b> is an internet bot</div></li>
<li><a class="r" href='http://b.example/scrapy'>Scrapy</a>
  <p>Scrapy, a fast high-level web crawling framework ... crawler</p></li>
<li><a href="http://c.example/">Heritrix</a><p>Heritrix is the Internet Archive's open-source crawler</p></li>
</ol>
<a href="/about">About</a></body></html>"""


def test_a_keyword_search_result_page_lists_links_followed_by_the_keywords(keyword_search):
    tc = keyword_search.recognizer()
    values = keyword_search.examples[0].values()
    assert values == {"keywords": "crawler"}
    match = tc.find("ResultList", SEARCH_PAGE, values)
    assert match.elements["url"] == ["http://a.example/", "http://b.example/scrapy", "http://c.example/"]
    assert match.elements["keywords"] == ["crawler", "crawler", "crawler"]  # the first in its link's own text
    assert tc.find("ResultList", SEARCH_PAGE, {"keywords": "sailing"}) is None


def test_a_result_is_a_link_whose_text_or_the_text_after_it_holds_the_keywords(keyword_search):
    tc = keyword_search.recognizer()
    titles = '<a href="/r/1">European nightcrawler</a> 1,720 bp <a href="/r/2">Night crawler</a> 658 bp'
    assert [m.elements["url"] for m in tc.find_all("SearchResult", titles, {"keywords": "crawler"})] == [
        ["/r/1"], ["/r/2"]]
    # the nearest link before the keywords is the result's, not a menu's further up
    page = '<a href="/home">Home</a> <h2>Results</h2> <a href="/r/3">Report</a> about crawlers'
    assert tc.find("SearchResult", page, {"keywords": "crawler"}).elements["url"] == ["/r/3"]
    assert tc.find("SearchResult", '<a href="/search?q=crawler">next</a> page', {"keywords": "crawler"}) is None


def test_a_single_result_is_not_a_result_list(keyword_search):
    page = '<a href="http://a.example/">A</a> about crawler'
    tc = keyword_search.recognizer()
    assert tc.find("SearchResult", page, {"keywords": "crawler"}) is not None
    assert tc.find("ResultList", page, {"keywords": "crawler"}) is None


@pytest.mark.parametrize("hostile", [
    ("Query: 1 " + "A" * 997) * 2_100,  # alignment lines that never end in a number
    ("Query: 1 " + "ACGT" * 30 + " 2\n" + " " * 10 + "|" * 100 + "\n") * 8_300,  # no subject line
    ("> x\n Score = 1 Expect = 1\n" + "Query: 1 " + "ACGT" * 300 + " 2\n  |||\n") * 1_700,  # no Sbjct line
], ids=["unterminated-lines", "no-subject", "no-sbjct-line"])
def test_a_hostile_page_is_scanned_by_re2_in_linear_time(blastn, hostile):
    tc = blastn.recognizer()
    assert len(hostile) >= 2_000_000
    assert tc.find("SummaryPage", hostile) is None
    assert isinstance(tc.compiled("SummaryPage"), RE2_TYPE) and tc.uses_re2("SummaryPage")


def test_the_scanned_text_is_capped():
    from scd.types import TypeDef

    tc = TypeCompiler({"Word": TypeDef("Word", "string", "needle")}, max_text=1000)
    assert tc.find("Word", "x" * 999 + "needle") is None
    assert tc.find("Word", "x" * 994 + "needle").start == 994


# -- query forms and "no results" (issue 43) ----------------------------------------------------------


def with_noresults(path: Path, *patterns: str) -> Path:
    body = "".join(f"<pattern>{p}</pattern>" for p in patterns)
    path.write_text(path.read_text().replace("</examples>", f"</examples>\n  <noresults>{body}</noresults>"))
    return path


def test_a_form_vertex_says_whether_its_post_forms_are_queries_and_what_they_may_carry(tmp_path):
    path = scd_file(tmp_path)
    path.write_text(path.read_text().replace('origin="true"/>', 'origin="true" post="true" allow="upload email"/>'))
    start = load_scd(path).controlflow.vertices["start"]
    assert start.post and start.allow == {"email", "upload"}
    plain = load_scd(scd_file(tmp_path)).controlflow.vertices["start"]
    assert not plain.post and plain.allow == frozenset()


def test_allow_takes_only_the_fields_a_query_form_may_carry(tmp_path):
    path = scd_file(tmp_path)
    path.write_text(path.read_text().replace('origin="true"/>', 'origin="true" allow="password"/>'))
    assert "t.xml:" in load_error(path) and "password" in load_error(path)


def test_post_on_a_vertex_that_is_not_a_form_is_refused(tmp_path):
    path = scd_file(tmp_path)
    path.write_text(path.read_text().replace('result="true"/>', 'result="true" post="true"/>'))
    assert "vertex 'end': post and allow describe forms" in load_error(path)


def test_noresults_patterns_find_what_an_empty_answer_says_with_the_probes_value(tmp_path):
    sc = load_scd(with_noresults(scd_file(tmp_path), "(?i:no results)", "nothing matches {arg:w}"))
    assert sc.no_results("Sorry, No Results here") == "No Results"
    assert sc.no_results("nothing matches abc", {"w": "abc"}) == "nothing matches abc"
    assert sc.no_results("12 results for abc", {"w": "abc"}) is None


@pytest.mark.parametrize(("pattern", "reason"), [
    ("(unclosed", "noresults: pattern '(unclosed'"),
    ("none for {arg:nope}", "refers to {arg:nope}, which no probing template defines"),
    ("  ", "an empty pattern would match every answer"),
])
def test_bad_noresults_patterns_are_refused_with_file_and_line(tmp_path, pattern, reason):
    message = load_error(with_noresults(scd_file(tmp_path), pattern))
    assert reason in message and "t.xml:" in message


@pytest.mark.parametrize(("name", "answer"), [
    ("keyword_search", "No matches found."),
    ("keyword_search", '0 rows where search matches "zqxjvbw"'),
    ("keyword_search", "Your search - zqxjvbw - did not match any documents."),
    ("nucleotide_blast", " ***** No hits found *****"),
    ("protein_blast", " ***** No hits found *****"),
])
def test_the_shipped_classes_know_what_their_empty_answers_say(name, answer):
    assert load_scd(SERVICECLASSES / f"{name}.xml").no_results(answer)


def test_the_shipped_classes_say_which_post_forms_are_queries():
    for name in ("nucleotide_blast", "protein_blast"):
        vertices = load_scd(SERVICECLASSES / f"{name}.xml").controlflow.vertices
        assert vertices["start"].post and vertices["format"].post and vertices["start"].allow == {"email", "upload"}
    start = load_scd(SERVICECLASSES / "keyword_search.xml").controlflow.vertices["start"]
    assert start.post and start.allow == frozenset()
