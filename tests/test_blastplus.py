"""The shipped BLAST service classes on REAL BLAST+ output, and the local service that runs the
real blastn (webrace.demo.blastplus).

The reports in tests/fixtures/blast/ were made by NCBI BLAST+ 2.12.0 with
tests/fixtures/blast/make_fixtures.py (its COMMANDS.txt lists every command); the tests that
read them need no BLAST+. Expected values are read from the reports by ``report_hsps``, a
line-by-line reading of the pairwise layout that shares nothing with the service classes.
Only the tests that run BLAST+ itself are skipped when it is not installed.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import lxml.html
import pytest

from scd import ServiceClass, load_scd
from webrace.demo.servicekit import blast_report, clean_sequence, report_html, report_text
from webrace.demo.services import Services, local_opener
from webrace.dynabot.analyzer import extract, next_step

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "blast"
NO_BLAST = pytest.mark.skipif(shutil.which("blastn") is None or shutil.which("makeblastdb") is None,
                              reason="NCBI BLAST+ (blastn, makeblastdb) is not installed: apt-get install ncbi-blast+")
TAG = re.compile(r"<[^>]*>")


@pytest.fixture(scope="module")
def nucleotide() -> ServiceClass:
    return load_scd(ROOT / "serviceclasses" / "nucleotide_blast.xml")


@pytest.fixture(scope="module")
def protein() -> ServiceClass:
    return load_scd(ROOT / "serviceclasses" / "protein_blast.xml")


def report(name: str) -> str:
    return (FIXTURES / name).read_text()


def page_text(markup: str) -> str:
    """What DynaBot reads as an HTML page's text (webrace/spiders/dynabot.py)."""
    return lxml.html.fromstring(markup).text_content()


def as_served(name: str, how: str) -> tuple[str, str]:
    """(markup, text) of a fixture as DynaBot would read it from a service answering with it:
    ``plain`` as text/plain, ``pre`` inside the <pre> of an HTML page, ``html`` as it is (a
    -html report)."""
    body = report(name)
    if how == "plain":
        return body, body
    if how == "pre":
        body = (f"<!DOCTYPE html>\n<html><head><title>BLAST results</title></head><body>\n"
                f"<h1>Results</h1>\n<pre>\n{html.escape(body)}</pre>\n</body></html>\n")
    return body, page_text(body)


def report_hsps(text: str) -> list[dict]:
    """Every HSP of a pairwise report, read line by line: the subject it belongs to, its score,
    Expect and Identities lines, and its query and subject letters."""
    hsps: list[dict] = []
    subject = ""
    for line in text.splitlines():
        if line.startswith(">"):
            subject = line[1:].strip()
        elif line.startswith(" Score ="):
            fields = dict(part.strip().split(" = ", 1) for part in line.split(",") if " = " in part)
            hsps.append({"subject": subject, "score": fields["Score"], "expect": next(
                v for k, v in fields.items() if k.startswith("Expect")), "query": "", "sbjct": "", "m": [], "n": []})
            subject = ""  # the subject's further HSPs follow without its line
        elif line.startswith(" Identities =") and hsps:
            hsps[-1]["identities"] = line.split(",")[0].strip()
        elif line.startswith(("Query ", "Sbjct ")) and hsps:
            name, start, letters, end = line.split()
            hsps[-1]["query" if name == "Query" else "sbjct"] += letters
            hsps[-1]["m"].append(start)
            hsps[-1]["n"].append(end)
    return hsps


def result(service: ServiceClass, markup: str, text: str) -> tuple:
    """(step, extracted) as DynaBot sees an answer to its first probe of the class."""
    values = service.examples[0].values()
    step = next_step(service, "start", "http://127.0.0.1/search", markup, text, [], values)
    extracted = extract(service, step.vertex, markup, text, values) if step.kind == "result" else []
    return step, extracted


def assert_extracted_as_reported(extracted: list[dict], text: str) -> None:
    """Each extracted Alignment is one HSP of the report, in order, with its score, E-value,
    identities, coordinates and sequences (tags that colour letters in the markup aside)."""
    expected = report_hsps(text)
    assert expected and len(extracted) == len(expected)
    for found, hsp in zip(extracted, expected, strict=True):
        elements = found["elements"]
        assert elements["score"] == [f"Score = {hsp['score']}"]
        assert elements["Evalue"][0].endswith(f"= {hsp['expect']}") and elements["Evalue"][0].startswith("Expect")
        assert elements["Identities"] == [hsp["identities"]]
        letters = [TAG.sub("", value) for value in elements["Sequence"]]
        assert "".join(letters[0::2]) == hsp["query"] and "".join(letters[1::2]) == hsp["sbjct"]
        assert (elements["m"], elements["n"]) == (hsp["m"], hsp["n"])  # query, subject, query...
        if hsp["subject"]:
            assert hsp["subject"].split()[0] in TAG.sub("", elements["geneLink"][0])
        else:
            assert "geneLink" not in elements


# -- nucleotide BLAST: blastn -----------------------------------------------------------------


@pytest.mark.parametrize("how", ["plain", "pre"])
@pytest.mark.parametrize("name", ["blastn.txt", "blastn_gis.txt"])
def test_blastn_pairwise_text_is_a_nucleotide_result_and_every_alignment_is_extracted(nucleotide, name, how):
    markup, text = as_served(name, how)
    step, extracted = result(nucleotide, markup, text)
    assert step.kind == "result" and step.vertex.name == "summary"
    assert_extracted_as_reported(extracted, report(name))


def test_blastn_html_report_is_a_nucleotide_result_and_every_alignment_is_extracted(nucleotide):
    markup, text = as_served("blastn.html", "html")
    step, extracted = result(nucleotide, markup, text)
    assert step.kind == "result"
    assert_extracted_as_reported(extracted, text)
    # BLAST+ -html wraps the bases its filter masked in <font>: read from the markup, a
    # sequence keeps the tags, and the letters are the report's
    assert any("<font" in value for found in extracted for value in found["elements"]["Sequence"])


def test_blastn_values_are_those_of_the_report(nucleotide):
    markup, text = as_served("blastn.txt", "plain")
    first, second, minus, host_plus, host_minus = (found["elements"] for found in result(nucleotide, markup, text)[1])
    assert first["geneLink"] == [">KX900101.1 Synthetic construct heat shock-like protein (hslA) gene, complete "]
    assert (first["score"], first["Evalue"], first["Identities"]) == (
        ["Score = 678 bits (751)"], ["Expect = 0.0"], ["Identities = 385/390 (99%)"])
    assert first["Sequence"][:2] == ["GGGCCGGATTCACAAAACCAGCTTCACGGAAATGTACACGTAGCTCCCTCGGAACGCGAA",
                                     "GGGCCGGATTCACAAAACCAGCTTCACGGAAATGTACACGGAGCTCCCTCGGAACGCGAA"]
    assert first["Sequence"][6] == "aaaaaaaGTA-TTTCAAAATGAAGATCCTTTTCTGTGCGCAAAGAGCCAAGATATTGAAT"  # masked, a gap
    assert second["Identities"] == ["Identities = 351/390 (90%)"] and second["Evalue"] == ["Expect = 5e-152"]
    assert minus["geneLink"][0].startswith(">contig_7 ") and minus["m"][:2] == ["121", "420"]  # Plus/Minus
    assert minus["n"][-1] == "151"
    assert host_plus["geneLink"][0].startswith(">NM_900104.2 ")
    assert "geneLink" not in host_minus  # the same subject's second HSP, on the other strand
    assert host_minus["Sequence"][-2:] == ["AATTAGT", "AATTAGT"] and host_minus["n"][-2:] == ["74", "331"]


def test_blastn_gi_deflines_start_their_alignments(nucleotide):
    extracted = result(nucleotide, *as_served("blastn_gis.txt", "plain"))[1]
    assert extracted[0]["elements"]["geneLink"][0].startswith(">gi|900101|gb|KX900101.1| Synthetic construct")


@pytest.mark.parametrize("name,how", [("blastn_nohits.txt", "plain"), ("blastn_nohits.txt", "pre"),
                                      ("blastn_nohits.html", "html")])
def test_blastn_no_hits_is_an_empty_nucleotide_result(nucleotide, name, how):
    markup, text = as_served(name, how)
    step, extracted = result(nucleotide, markup, text)
    assert step.kind == "result" and extracted == []
    assert step.match.elements["Message"][0].strip() == "***** No hits found *****"


# -- protein BLAST: blastp, and what else the class takes -----------------------------------------


@pytest.mark.parametrize("name,how", [("blastp.txt", "plain"), ("blastp.txt", "pre"), ("blastp.html", "html")])
def test_blastp_is_a_protein_result_and_every_alignment_is_extracted(protein, name, how):
    markup, text = as_served(name, how)
    step, extracted = result(protein, markup, text)
    assert step.kind == "result"
    assert_extracted_as_reported(extracted, text)


def test_blastp_values_are_those_of_the_report(protein):
    extracted = result(protein, *as_served("blastp.txt", "plain"))[1]
    first, *_, last = (found["elements"] for found in extracted)
    assert first["geneLink"] == [">Q9SYN1 Heat shock-like protein HslA OS=Synthetic construct OX=32630 "]
    assert (first["score"], first["Evalue"], first["Identities"]) == (
        ["Score = 339 bits (869)"], ["Expect = 3e-125"], ["Identities = 162/170 (95%)"])
    assert first["Sequence"][:2] == ["NQLHGNVHAAPSERENFKLVRRLARPVLVMLTGPMDSLEFPVNELEDDSKNPYKAKKTNF",
                                     "NQLHGNVHGAPSERENFKLVRRLARPVLVLLTGPMDSLEFPVNELEDDSKNPYKAKKSNF"]
    assert last["Sequence"] == ["LTACL", "LTVCL"] and last["Evalue"] == ["Expect = 9.6"]  # a 5-letter alignment


@pytest.mark.parametrize("name,how", [("blastp_nohits.txt", "plain"), ("blastp_nohits.txt", "pre")])
def test_blastp_no_hits_is_an_empty_protein_result(protein, name, how):
    step, extracted = result(protein, *as_served(name, how))
    assert step.kind == "result" and extracted == [] and "No hits found" in step.match.elements["Message"][0]


@pytest.mark.parametrize("name,how", [("blastx.txt", "plain"), ("blastx.html", "html"), ("tblastn.txt", "pre")])
def test_blastx_and_tblastn_reports_align_protein_sequences_and_are_protein_results(protein, name, how):
    markup, text = as_served(name, how)
    step, extracted = result(protein, markup, text)
    assert step.kind == "result"
    assert_extracted_as_reported(extracted, text)


# -- what each class must not claim ---------------------------------------------------------------


@pytest.mark.parametrize("name,how", [
    ("blastx.txt", "plain"), ("blastx.txt", "pre"), ("blastx.html", "html"),
    ("blastp.txt", "plain"), ("blastp.txt", "pre"), ("blastp.html", "html"),
    ("blastp_nohits.txt", "plain"), ("blastp_nohits.txt", "pre"), ("tblastn.txt", "plain"),
])
def test_blastp_blastx_and_tblastn_output_is_not_claimed_by_the_nucleotide_class(nucleotide, name, how):
    markup, text = as_served(name, how)
    assert nucleotide.recognizer().find("SummaryPage", markup) is None
    assert nucleotide.recognizer().find("SummaryPage", text) is None
    assert result(nucleotide, markup, text)[0].kind == "none"


@pytest.mark.parametrize("name,how", [
    ("blastn.txt", "plain"), ("blastn.txt", "pre"), ("blastn.html", "html"), ("blastn_gis.txt", "plain"),
    ("blastn_nohits.txt", "plain"), ("blastn_nohits.txt", "pre"), ("blastn_nohits.html", "html"),
])
def test_blastn_output_is_not_claimed_by_the_protein_class(protein, name, how):
    markup, text = as_served(name, how)
    assert protein.recognizer().find("SummaryPage", markup) is None
    assert protein.recognizer().find("SummaryPage", text) is None


HEADERS = {  # the line a report starts with -> is it nucleotide BLAST's, protein BLAST's
    "BLASTN 2.12.0+": (True, False),
    "<b>BLASTN 2.12.0+</b>": (True, False),
    "BLASTN 2.2.26 [Sep-21-2011]": (True, False),
    "BLASTP 2.12.0+": (False, True),
    "BLASTX 2.2.26 [Sep-21-2011]": (False, True),
    "TBLASTN 2.12.0+": (False, True),
    "TBLASTX 2.12.0+": (False, True),
    "<h1>Results</h1>": (True, True),  # no program named: either
}


@pytest.mark.parametrize("header", HEADERS)
def test_a_no_hits_answer_belongs_to_the_classes_of_the_program_it_names(nucleotide, protein, header):
    page = f"<html><body><pre>{header}\n\nQuery= probe\nLength=98\n\n\n***** No hits found *****\n</pre></body></html>"
    found = tuple(service.recognizer().find("SummaryPage", page) is not None for service in (nucleotide, protein))
    assert found == HEADERS[header]


def test_a_program_named_only_in_passing_does_not_decide(nucleotide, protein):
    menu = "<a href='/p'>BLASTP</a> | <a href='/x'>TBLASTN</a> | <a href='/n'>BLASTN</a>\n"
    nohits = "<pre>{}Query= probe\n\n***** No hits found *****</pre>"
    for page, expected in ((menu + nohits.format(""), (True, True)),  # a menu names programs, no report did
                           (menu + nohits.format("BLASTN 2.12.0+\n"), (True, False)),
                           (menu + nohits.format("TBLASTN 2.12.0+\n"), (False, True))):  # not BLASTN
        assert tuple(service.recognizer().find("SummaryPage", page) is not None
                     for service in (nucleotide, protein)) == expected, page


@pytest.mark.parametrize("score", ["Score = 1.055e+04 bits (5713)", "Score = 1234 (234.5 bits)"])
def test_a_bit_score_with_an_exponent_or_after_the_raw_score_is_a_score(nucleotide, score):
    text = report("blastn.txt").replace("Score = 678 bits (751)", score)
    assert nucleotide.recognizer().find("Alignment", text).elements["score"] == [score]


def test_a_report_with_crlf_line_ends_is_read_alike(nucleotide):
    text = report("blastn.txt").replace("\n", "\r\n")
    step, extracted = result(nucleotide, text, text)
    assert step.kind == "result"
    assert_extracted_as_reported(extracted, report("blastn.txt"))


def test_a_report_a_front_end_writes_from_blast_xml_is_read(nucleotide):
    # "Score: ...", "E value: ...", "Identities: ..." and the subject in a heading of its own
    hsps = report_hsps(report("blastn.txt"))
    text = report("blastn.txt").replace("Expect = ", "E value: ").replace("Score = ", "Score: ")
    text = re.sub(r"\n&gt;([^\n]*)", r"\n<h4>\1</h4>", html.escape(text.replace("Identities = ", "Identities: ")))
    page = f"<html><body><pre>{text}</pre></body></html>"
    assert "&gt;" not in page and page.count("<h4>") == 4
    extracted = result(nucleotide, page, page_text(page))[1]
    assert [found["elements"]["Evalue"][0] for found in extracted] == [f"E value: {h['expect']}" for h in hsps]
    assert [found["elements"]["Identities"][0] for found in extracted] == [
        h["identities"].replace(" =", ":") for h in hsps]


# -- the legacy layout of the hand-written test services --------------------------------------------


@pytest.mark.parametrize("plus", [False, True], ids=["legacy", "blast+-layout"])
def test_the_test_services_reports_are_still_recognised_and_extracted(nucleotide, protein, plus):
    name, letters = clean_sequence(nucleotide.examples[0].arguments[0].value)
    lines = blast_report(name, letters, "BLASTN", plus=plus)
    for markup in (report_html(lines), report_text(lines)):
        step, extracted = result(nucleotide, markup, page_text(markup) if markup.startswith("<") else markup)
        assert step.kind == "result" and len(extracted) == 2
        assert all(found["elements"]["Identities"][0].startswith("Identities = ") for found in extracted)
        assert "".join(extracted[0]["elements"]["Sequence"][0::2]) in letters
        assert protein.recognizer().find("SummaryPage", markup) is None
    aa = clean_sequence(protein.examples[0].arguments[0].value)[1]
    markup = report_html(blast_report("probe", aa, "BLASTP", plus=plus))
    step, extracted = result(protein, markup, page_text(markup))
    assert step.kind == "result" and len(extracted) == 2 and extracted[0]["elements"]["Identities"]
    assert nucleotide.recognizer().find("SummaryPage", markup) is None


def test_the_test_services_no_hits_report_is_nucleotide_blasts_only(nucleotide, protein):
    markup = report_html(blast_report("probe", "ACGT" * 10, "BLASTN", hits=[]))
    assert nucleotide.recognizer().find("SummaryPage", markup).elements["Message"]
    assert protein.recognizer().find("SummaryPage", markup) is None  # it names BLASTN


# -- the fixtures, and the service in front of the real blastn -------------------------------------


@NO_BLAST
def test_make_fixtures_reproduces_the_checked_in_reports(tmp_path):
    done = subprocess.run([sys.executable, str(FIXTURES / "make_fixtures.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".txt", ".html", ".fasta"))
    for name in made:  # BLAST+ writes the date its database was built: nothing else may differ
        fresh, kept = ((folder / name).read_text().splitlines() for folder in (tmp_path, FIXTURES))
        assert [line for line in fresh if "Posted date" not in line] == \
               [line for line in kept if "Posted date" not in line], name


@pytest.fixture(scope="module")
def services() -> Iterator[Services]:
    with Services() as started:
        yield started


def post(url: str, fields: dict) -> tuple[int, str, str]:
    request = urllib.request.Request(url, urlencode(fields).encode())
    try:
        with local_opener().open(request, timeout=60) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


@NO_BLAST
@pytest.mark.parametrize("name", ["blastplus-text", "blastplus-html"])
def test_the_blastplus_services_answer_a_probe_with_a_real_blastn_report_of_the_nucleotide_class(
        services, nucleotide, protein, name):
    assert services.url(name) in services.members["nucleotide_blast"]
    with local_opener().open(services.url(name), timeout=30) as answer:
        start = answer.read().decode()
    assert 'name="QUERY"' in start and 'action="search"' in start
    probe = nucleotide.examples[0].arguments[0].value
    status, content_type, markup = post(services.url(name) + "search", {"QUERY": probe, "DATABASE": "demo_nt",
                                                                         "PROGRAM": "megablast", "EXPECT": "10"})
    assert (status, content_type) == (200, "text/html; charset=utf-8")
    assert "BLASTN 2." in markup and "ncbi.nlm.nih.gov" not in markup  # record links stay on this host
    step, extracted = result(nucleotide, markup, page_text(markup))
    assert step.kind == "result" and extracted
    assert_extracted_as_reported(extracted, page_text(markup))
    assert all(TAG.sub("", s).upper() in probe.upper() for s in extracted[0]["elements"]["Sequence"][0::2])
    assert protein.recognizer().find("SummaryPage", markup) is None


@NO_BLAST
@pytest.mark.parametrize("name", ["blastplus-text", "blastplus-html"])
def test_the_blastplus_services_answer_unrelated_dna_with_no_hits_and_refuse_bad_queries(services, nucleotide, name):
    unrelated = "GATTACA" * 3 + "TTGACCGTAGGCATCCAGTTACGGAT" * 4
    markup = post(services.url(name) + "search", {"QUERY": f">unrelated\n{unrelated}", "PROGRAM": "blastn"})[2]
    step, extracted = result(nucleotide, markup, page_text(markup))
    assert step.kind == "result" and extracted == [] and "No hits found" in step.match.elements["Message"][0]
    status, _, markup = post(services.url(name) + "search", {"QUERY": "MALWMRLLPLLALLALWGPDPAAAF"})
    assert status == 200 and "Invalid nucleotide sequence" in markup
    assert result(nucleotide, markup, page_text(markup))[0].kind == "none"
    assert post(services.url(name) + "search", {"QUERY": "ACGT" * 3000})[0] == 400  # 12000 bases: too long
    assert post(services.url(name) + "search", {"QUERY": unrelated, "PROGRAM": "tblastx"})[0] == 400
