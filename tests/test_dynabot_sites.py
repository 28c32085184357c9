"""DynaBot's local services (webrace.demo.services) answer as their descriptions say, and log every request."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from urllib3 import encode_multipart_formdata

from webrace.demo.servicekit import CLASSES, clean_sequence, format_evalue
from webrace.demo.services import SERVICES, Services, local_opener

DNA = ">probe\nTGGCAGGCGTCCTGCTTTAACGGTTACGATCGATCGGGCTAGCTAGCATCGACTAGC\nTACGACTGACTGACGATCGTAGCTAGCGGGCGA"
OTHER_DNA = "ACGTACGTTTGACCAGTAGGATCCATGCATGCAAGCTTGAATTCCGCGGATATCGTAC"
ALIGNMENT = re.compile(r"^Query:? +(\d+) +([A-Z]+) +(\d+)$", re.M)


@pytest.fixture(scope="module")
def services() -> Iterator[Services]:
    with Services() as started:
        yield started


def fetch(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str, str]:
    """(status, Content-Type, text) of one request to the local server."""
    assert url.startswith("http://127.0.0.1:")
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with local_opener().open(request, timeout=30) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def post(url: str, fields: dict) -> tuple[int, str, str]:
    return fetch(url, urlencode(fields).encode())


def get(url: str, fields: dict) -> tuple[int, str, str]:
    return fetch(f"{url}?{urlencode(fields)}")


def assert_report(text: str, program: str = "BLASTN", sequence: str = DNA) -> None:
    assert f"{program} 2.2." in text
    assert "Sequences producing significant alignments:" in text
    letters = clean_sequence(sequence)[1]
    aligned = ALIGNMENT.findall(text)
    assert aligned and all(piece in letters for _, piece, _ in aligned)  # the report aligns the input


@pytest.mark.parametrize("name", [s.name for s in SERVICES])
def test_every_start_page_is_served(services, name):
    status, content_type, text = fetch(services.url(name))
    assert (status, content_type) == (200, "text/html; charset=utf-8")
    # no <form> in the HTML: the page about BLAST, the wizard's frame, and the pages whose scripts build it
    assert ("<form" in text) == (name not in ("about", "blastn-wizard") and not name.startswith("scripted-"))


def test_robots_txt_disallows_private(services):
    assert fetch(services.url("/robots.txt"))[2] == "User-agent: *\nDisallow: /private/\n"


def test_members_and_non_members_partition_the_listed_services(services):
    listed = {services.url(s.name) for s in SERVICES if s.listed}
    for service_class in CLASSES:
        members, others = services.members[service_class], services.non_members[service_class]
        assert members and not set(members) & set(others)
        assert set(members) | set(others) == listed
    assert len(services.members["nucleotide_blast"]) == len(
        [s for s in SERVICES if s.listed and s.member_of == "nucleotide_blast"]) >= 9
    assert services.url("hostile") not in listed


def test_simple_get_report_depends_on_the_sequence(services):
    status, _, text = get(services.url("blastn-get") + "search", {"sequence": DNA})
    assert status == 200
    assert_report(text)
    assert re.search(r'<a href="/entrez/[A-Z_0-9]+">&gt;gi\|\d+\|', text)
    other = get(services.url("blastn-get") + "search", {"sequence": OTHER_DNA})[2]
    assert_report(other, sequence=OTHER_DNA)
    assert ALIGNMENT.findall(other) != ALIGNMENT.findall(text)


def test_non_dna_is_an_invalid_nucleotide_sequence(services):
    for sequence in ("MKVLAAGIVGLLLAQSTEAA", "ACGT ACGU", "blast search", ""):
        assert "Invalid nucleotide sequence" in get(services.url("blastn-get") + "search", {"sequence": sequence})[2]


COMPLEX_DEFAULTS = {"CMD": "Put", "SERVICE": "plain", "CLIENT": "web", "PAGE": "Search", "PROGRAM": "blastp",
                    "DATABASE": "", "QUERY_DATA": DNA, "EXPECT": "10", "MATRIX_NAME": "BLOSUM62", "FILTER": "L"}


def test_complex_post_wants_blastn_a_real_database_and_the_search_button(services):
    action = services.url("blastn-post") + "blast.cgi"
    assert "QUERY_DATA" in post(action, {**COMPLEX_DEFAULTS, "action": "Clear"})[2]  # the blank form again
    assert "Please choose a database" in post(action, {**COMPLEX_DEFAULTS, "action": "Search"})[2]
    chosen = {**COMPLEX_DEFAULTS, "PROGRAM": "blastn", "DATABASE": "nt", "action": "Search"}
    assert "Please choose a database" in post(action, {**chosen, "DATABASE": "swissprot"})[2]
    assert_report(post(action, chosen)[2])
    status, content_type, text = post(action, {**chosen, "FORMAT_TYPE": "Text"})
    assert content_type.startswith("text/plain") and text.startswith("BLASTN 2.2.26")
    assert fetch(action)[0] == 405


def test_multipart_form_requires_multipart_and_writes_blast_plus_alignments(services):
    action = services.url("blastn-multipart") + "run"
    assert post(action, {"seq_input": DNA})[0] == 400
    body, content_type = encode_multipart_formdata([("seq_input", DNA), ("seq_file", ("", b"", "text/plain")),
                                                    ("program", "megablast")])
    status, _, text = fetch(action, body, {"Content-Type": content_type})
    assert status == 200
    assert_report(text)
    assert re.search(r"^Query  \d+ +[ACGT]+  \d+$", text, re.M)  # no colon
    upload = ("seq_file", ("q.fa", DNA.encode(), "text/plain"))  # or the sequence comes as a file
    body, content_type = encode_multipart_formdata([("seq_input", ""), upload])
    assert_report(fetch(action, body, {"Content-Type": content_type})[2])


def test_format_page_is_a_second_form_leading_to_the_report(services):
    text = post(services.url("blastn-format") + "put", {"CMD": "Put", "SEQ": DNA})[2]
    rid = re.search(r'name="RID" value="([^"]+)"', text).group(1)
    assert 'action="get"' in text and "View report" in text
    assert_report(get(services.url("blastn-format") + "get", {"RID": rid, "CMD": "Get", "FORMAT_TYPE": "HTML"})[2])
    assert get(services.url("blastn-format") + "get", {"RID": "nope"})[0] == 404


def test_job_page_links_to_the_results(services):
    text = post(services.url("blastn-job") + "submit", {"query": DNA, "database": "nt"})[2]
    assert "is running" in text
    link = re.search(r'<a href="([^"]+)">View results</a>', text).group(1)
    assert_report(fetch(services.url("blastn-job") + link)[2])


def test_nohits_member_finds_nothing(services):
    text = post(services.url("blastn-nohits") + "blast", {"query_sequence": DNA, "database": "mito"})[2]
    assert "***** No hits found ******" in text and "BLASTN 2.2.26" in text


def test_database_member_needs_a_nucleotide_database(services):
    query = services.url("blastn-db") + "query"
    assert "holds protein sequences" in get(query, {"q": DNA, "db": "swissprot"})[2]
    assert_report(get(query, {"q": DNA, "db": "nt"})[2])


def test_protein_services_answer_dna_with_protein_alignments(services):
    text = get(services.url("blastp-get") + "search", {"sequence": DNA})[2]
    assert_report(text, "BLASTP")
    assert "Positives =" in text and "Strand" not in text
    assert "Invalid protein sequence" in get(services.url("blastp-get") + "search", {"sequence": "AC1GT"})[2]
    protein_post = {**COMPLEX_DEFAULTS, "PROGRAM": "blastp", "DATABASE": "swissprot", "action": "Search"}
    assert_report(post(services.url("blastp-post") + "blast.cgi", protein_post)[2], "BLASTP")


def test_look_alikes_answer_without_reports(services):
    assert "Invalid username or password" in post(services.url("login") + "login", {"username": DNA})[2]
    assert "Thank you for your message" in post(services.url("contact") + "send", {"message": DNA})[2]
    assert "chromosome" in get(services.url("browse") + "list", {"organism": "Yeast"})[2]
    assert get(services.url("broken") + "search", {"sequence": DNA})[0] == 500
    assert "No results" in get(services.url("search-none") + "results", {"q": "nucleotide"})[2]


def test_keyword_search_lists_the_documents_holding_the_keywords_and_nothing_for_others(services):
    for text in (get(services.url("search-get") + "results", {"q": "web crawler"})[2],
                 post(services.url("search-post") + "results", {"query": "web crawler", "lang": "en"})[2]):
        results = re.findall(r'<a href="/doc/(\d+)">[^<]+</a>\s*<p class="snippet">([^<]*)</p>', text)
        assert len(results) == 5
        assert all("web" in snippet.lower() and "crawler" in snippet for _, snippet in results)
    assert "No results" in get(services.url("search-get") + "results", {"q": "rrlcweaqzx"})[2]


def test_hostile_search_is_five_megabytes_of_unfinished_alignments(services):
    status, _, text = get(services.url("hostile") + "search", {"sequence": DNA})
    assert status == 200 and len(text) >= 5 * 1024 * 1024
    assert text.count("Query: 1 " + "A" * 4000) > 400
    assert not ALIGNMENT.search(text)


def test_hits_log_records_every_request_until_reset(services):
    services.reset()
    fetch(services.url("blastn-post"), headers={"User-Agent": "DynaBot-test"})
    post(services.url("blastn-post") + "blast.cgi", {"QUERY_DATA": "ACGT"})
    get(services.url("blastn-get") + "search", {"sequence": "ACGT"})
    fetch(services.url("/missing"))
    hits = services.hits()
    assert [(h["method"], h["path"], h["status"]) for h in hits] == [
        ("GET", "/blastn-post/", 200), ("POST", "/blastn-post/blast.cgi", 200), ("GET", "/blastn-get/search", 200),
        ("GET", "/missing", 404)]
    assert hits[0]["user_agent"] == "DynaBot-test"
    assert hits[1]["body_size"] == len("QUERY_DATA=ACGT")
    assert hits[2]["query"] == "sequence=ACGT"
    services.reset()
    assert services.hits() == []


@pytest.mark.parametrize("value, text", [(3.2e-300, "0.0"), (7e-46, "7e-46"), (3e-5, "3e-05"), (0.0031, "0.003"),
                                         (0.25, "0.25"), (3.14, "3.1"), (42.0, "42")])
def test_evalue_is_printed_as_ncbi_does(value, text):
    assert format_evalue(value) == text


@pytest.mark.parametrize("submitted, parsed", [
    (">my query\nacgt\nTTGA\n", ("my query", "ACGTTTGA")),
    ("  ac gt\r\n tt ", ("probe", "ACGTTT")),
    (">\nACGT", ("probe", "ACGT")),
])
def test_clean_sequence(submitted, parsed):
    assert clean_sequence(submitted) == parsed
