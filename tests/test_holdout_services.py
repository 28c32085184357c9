"""The hold-out services (holdout/holdout_services.py) answer a correct manual submission with
a real BLAST report: every member of nucleotide and protein BLAST, by hand, with urllib; and
the non-members and hostile sites behave as holdout/holdout_services.md says."""

from __future__ import annotations

import html
import http.cookiejar
import importlib.util
import re
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "holdout" / "holdout_services.py"

pytestmark = pytest.mark.skipif(
    any(shutil.which(p) is None for p in ("blastn", "blastp", "blastx", "tblastx", "tblastn", "makeblastdb",
                                          "blast_formatter")),
    reason="NCBI BLAST+ (blastn, blastp, blastx, tblastn, tblastx, makeblastdb, blast_formatter) is not installed")

# one worker runs this module (setup.cfg: --dist loadgroup): its module-wide set-up is paid once
pytestmark = [pytestmark, pytest.mark.xdist_group("holdout_services")]


def load_module():
    spec = importlib.util.spec_from_file_location("holdout_services", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


hs = load_module()
EST = hs.record("BX417123.1").letters[100:400]  # a 300-base piece of an EST in nt and est
MITO = hs.record("NC_001573.1").letters[1000:1300]
INSULIN = hs.PROTEINS["INS"]
GFP_CDS = hs.record("U55762.1").letters[90:390]  # the EGFP coding sequence's first 100 codons

# A nucleotide alignment block as BLAST prints it ("Query  1  ACGT  4" or "Query: 1 ACGT 4";
# SequenceServer writes "Subject"), in a page's text.
NUCLEOTIDE_BLOCK = re.compile(r"^Query:?\s+\d+\s+[ACGTNacgtn-]{10,}\s+\d+[ \t]*\n[ \t]+\|[| ]*\n"
                              r"(?:Sbjct|Subject):?\s+\d+\s+[ACGTNacgtn-]{10,}\s+\d+", re.M)
PROTEIN_BLOCK = re.compile(r"^Query:?\s+\d+\s+[A-Z-]*[DEFHIKLMPQRSVWY][A-Z-]*\s+\d+[ \t]*\n[ \t]+[A-Z+ ]+\n"
                           r"(?:Sbjct|Subject):?\s+\d+\s+[A-Z-]{10,}\s+\d+", re.M)


class Client:
    """urllib with cookies and no proxies; answers as (status, final URL, headers, text)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                  urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def open(self, url: str, data: dict | None = None, *, files: dict | None = None, limit: int | None = None):
        url = url if url.startswith("http") else self.base + url
        assert url.startswith("http://127.0.0.1:"), url  # never anywhere else
        headers, body = {}, None
        if files is not None:
            boundary = "----holdout-test-boundary"
            parts = []
            for name, value in (data or {}).items():
                parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n')
            for name, (filename, value) in files.items():
                parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"'
                             f"\r\nContent-Type: text/plain\r\n\r\n{value}\r\n")
            body = ("".join(parts) + f"--{boundary}--\r\n").encode()
            headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
        elif data is not None:
            body = urllib.parse.urlencode(data, doseq=True).encode()
        request = urllib.request.Request(url, data=body, headers=headers)
        try:
            with self.opener.open(request, timeout=60) as answer:
                return answer.status, answer.geturl(), answer.headers, answer.read(limit).decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, error.url, error.headers, error.read().decode("utf-8", "replace")


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def assert_nucleotide_report(page: str, subject: str = "BX417123.1") -> None:
    text = text_of(page)
    assert NUCLEOTIDE_BLOCK.search(text), text[:3000]
    assert subject in text
    assert re.search(r"Score\s*[=:]", text) and re.search(r"(Expect|E value)\s*[=:]", text)


def link(page: str, pattern: str) -> str:
    found = re.search(rf'href="([^"]*{pattern}[^"]*)"', page)
    assert found, page[:2000]
    return html.unescape(found.group(1))


@pytest.fixture(scope="module")
def services():
    with hs.HoldoutServices() as running:
        yield running


@pytest.fixture
def client(services):
    return Client(services.base)


# ---------------------------------------------------------------------------------------------
# nucleotide BLAST members, each submitted the way a person would
# ---------------------------------------------------------------------------------------------


def submit_ncbi_select(c: Client) -> str:
    status, _, _, page = c.open("/ncbi-select/cgi-bin/blast.cgi",
                                {"p": "blastn", "lib": "nt", "SEQ": EST, "E": "10", "F": "T", "B": "50"})
    assert status == 200
    return page


def submit_sequenceserver(c: Client) -> str:
    status, _, _, form = c.open("/sequenceserver/")
    nt = re.search(r'value="([0-9a-f]{32})"[^>]*>\s*<label[^>]*>Nucleotide collection', form).group(1)
    status, _, _, page = c.open("/sequenceserver/", {"sequence": f">est\n{EST}", "databases[]": nt,
                                                     "method": "blastn", "advanced": "-evalue 1e-5"})
    assert status == 200, page
    return page


def submit_jobqueue(c: Client) -> str:
    status, url, _, page = c.open("/jobqueue/submit", {"querySequence": EST, "database": "nt", "task": "megablast"})
    assert status == 200 and re.search(r"Job [0-9a-f]{6} submitted", page)
    for _ in range(20):
        refresh = re.search(r'http-equiv="refresh" content="1;url=([^"]+)"', page)
        if refresh is None:
            break
        time.sleep(1)  # as a browser does
        status, url, _, page = c.open(urllib.parse.urljoin(url, html.unescape(refresh.group(1))))
        assert status == 200
    base = re.search(r'<base href="([^"]+)">', page).group(1)
    report = urllib.parse.urljoin(base, link(page, r"format=html"))
    assert urllib.parse.urljoin(url, link(page, r"format=html")) != report  # the base href matters
    status, _, _, page = c.open(report)
    assert status == 200
    return page


def submit_redirect303(c: Client) -> str:
    status, url, _, page = c.open("/redirect303/search", {"seq": EST, "db": "nt", "program": "blastn"})
    assert status == 200 and "/redirect303/results/" in url  # urllib followed the 303 with a GET
    return page


def submit_iframe(c: Client) -> str:
    status, url, _, page = c.open("/iframe/run.php?" + urllib.parse.urlencode(
        {"seqtext": EST, "dataset": "nt", "prog": "blastn", "evalue": "1e-5"}))
    src = re.search(r'<iframe src="([^"]+)"', page).group(1)
    status, _, headers, report = c.open(urllib.parse.urljoin(url, src))
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    return report


def submit_download(c: Client) -> str:
    _, _, _, form = c.open("/download/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([0-9a-f]+)"', form).group(1)
    status, url, _, page = c.open("/download/submit/", {"csrfmiddlewaretoken": token, "query_sequence": EST,
                                                        "database": "nt", "expect": "0.001"})
    assert status == 200 and "Download the report (text)" in page
    status, _, headers, report = c.open(urllib.parse.urljoin(url, link(page, r"report/")))
    assert headers["Content-Disposition"].startswith("attachment")
    return report


def submit_fasta_required(c: Client) -> str:
    status, _, _, page = c.open("/fasta-required/blast.php", {"fasta": f">my_est\n{EST}", "dbname": "nt",
                                                               "program": "blastn", "max_target_seqs": "50"})
    assert status == 200
    return page


def submit_upload(c: Client) -> str:
    status, _, _, page = c.open("/upload/upload", {"db": "nt"}, files={"seqfile": ("est.fa", f">est\n{EST}\n")})
    assert status == 200
    return page


def submit_wizard(c: Client) -> str:
    status, url, _, step2 = c.open("/wizard/step2?program=blastn")
    assert 'name="querySeq"' in step2
    status, _, _, page = c.open("/wizard/run", {"program": "blastn", "querySeq": EST, "database": "nt"})
    assert status == 200
    return page


def submit_jobtitle(c: Client) -> str:
    status, _, _, page = c.open("/jobtitle/Blast.cgi", {"QUERY": EST, "JOB_TITLE": "my EST", "DATABASE": "nt",
                                                        "BLAST_PROGRAMS": "megaBlast"}, files={})
    assert status == 200 and "Job title: my EST" in page
    return page


def submit_nohits(c: Client) -> str:
    status, _, _, page = c.open("/nohits/search", {"sequence_data": MITO, "organelle": "mito", "expect": "0.001"})
    assert status == 200
    return page


MANUAL = {
    "ncbi-select": submit_ncbi_select, "sequenceserver": submit_sequenceserver, "jobqueue": submit_jobqueue,
    "redirect303": submit_redirect303, "iframe": submit_iframe, "download": submit_download,
    "fasta-required": submit_fasta_required, "upload": submit_upload, "wizard": submit_wizard,
    "jobtitle": submit_jobtitle, "nohits": submit_nohits,
}


def test_the_classes_have_enough_members_non_members_and_hostile_sites(services):
    assert len(services.members["nucleotide_blast"]) >= 8
    assert len(services.non_members["nucleotide_blast"]) >= 5
    assert len(services.hostile) == 4
    assert not set(services.hostile) & set(services.non_members["nucleotide_blast"])
    assert services.url("jobqueue") == f"{services.base}/jobqueue/"
    members = {url.rstrip("/").rsplit("/", 1)[1] for url in services.members["nucleotide_blast"]}
    assert members == set(MANUAL) | {"tabular"}


@pytest.mark.parametrize("name", sorted(MANUAL))
def test_a_nucleotide_member_answers_a_manual_submission_with_a_real_blastn_report(client, name):
    assert_nucleotide_report(MANUAL[name](client), "NC_001573.1" if name == "nohits" else "BX417123.1")


def test_the_tabular_member_answers_with_a_hit_table_and_no_alignments(client):
    status, _, _, page = client.open("/tabular/search?" + urllib.parse.urlencode(
        {"input": EST, "db": "nt", "evalue": "1e-10", "max": "50"}))
    assert status == 200
    row = re.search(r"<tr><td>Query_1</td><td>BX417123\.1</td><td>(\d+\.\d+)</td><td>300</td>", page)
    assert row and float(row.group(1)) > 95
    assert not NUCLEOTIDE_BLOCK.search(text_of(page))


def test_nohits_finds_nothing_for_a_sequence_from_elsewhere(client):
    status, _, _, page = client.open("/nohits/search", {"sequence_data": EST, "organelle": "mito",
                                                        "expect": "0.001"})
    assert status == 200 and "***** No hits found *****" in page


def test_protein_members_answer_a_protein_query_with_a_real_blastp_report(client):
    pages = [client.open("/ncbi-select/cgi-bin/blast.cgi", {"p": "blastp", "lib": "swissprot", "SEQ": INSULIN})[3],
             client.open("/blastp-only/blastp.cgi", {"protein_seq": INSULIN, "database": "swissprot",
                                                     "matrix": "BLOSUM62"})[3],
             client.open("/wizard/run", {"program": "blastp", "querySeq": INSULIN, "database": "swissprot"})[3]]
    form = client.open("/sequenceserver/")[3]
    sp = re.search(r'value="([0-9a-f]{32})"[^>]*>\s*<label[^>]*>UniProtKB', form).group(1)
    pages.append(client.open("/sequenceserver/", {"sequence": INSULIN, "databases[]": sp, "method": "blastp"})[3])
    for page in pages:
        text = text_of(page)
        assert PROTEIN_BLOCK.search(text) and "P01308" in text, text[:2000]


# ---------------------------------------------------------------------------------------------
# what real servers do with mistakes
# ---------------------------------------------------------------------------------------------


def test_wrong_program_and_database_combinations_are_named(client):
    page = client.open("/ncbi-select/cgi-bin/blast.cgi", {"p": "blastn", "lib": "swissprot", "SEQ": EST})[3]
    assert "Database swissprot is a protein database: choose a nucleotide database for blastn" in page
    page = client.open("/ncbi-select/cgi-bin/blast.cgi", {"p": "blastp", "lib": "swissprot", "SEQ": EST})[3]
    assert "looks like a nucleotide sequence" in page
    form = client.open("/sequenceserver/")[3]
    sp = re.search(r'value="([0-9a-f]{32})"[^>]*>\s*<label[^>]*>UniProtKB', form).group(1)
    status, _, _, page = client.open("/sequenceserver/", {"sequence": EST, "databases[]": sp, "method": "blastn"})
    assert status == 400 and "BLASTN cannot search protein databases" in page
    status, _, _, page = client.open("/sequenceserver/", {"sequence": EST, "method": "blastn"})
    assert status == 400 and "No database selected" in page


def test_validation_errors_read_like_real_servers(client):
    assert "Error: input must be in FASTA format (start with &gt;)" in client.open(
        "/fasta-required/blast.php", {"fasta": EST, "dbname": "nt", "program": "blastn"})[3]
    page = client.open("/jobtitle/Blast.cgi", {"QUERY": EST, "JOB_TITLE": "", "DATABASE": "nt"}, files={})[3]
    assert "Please fill in the job title" in page and EST in page  # the form again, as filled in
    assert "Please choose a BLAST program." in client.open("/wizard/step2")[3]
    assert client.open("/download/submit/", {"query_sequence": EST, "database": "nt"})[0] == 403
    assert client.open("/upload/upload", {"seqfile": EST, "db": "nt"})[0] == 400
    assert client.open("/redirect303/search")[0] == 405
    assert "Please choose a FASTA file" in client.open("/upload/upload", {"db": "nt"},
                                                       files={"seqfile": ("empty.fa", "")})[3]


def test_jobqueue_answers_no_such_job_to_an_undecoded_url(client):
    page = client.open("/jobqueue/submit", {"querySequence": EST, "database": "nt", "task": "megablast"})[3]
    job = re.search(r"Job ([0-9a-f]{6}) submitted", page).group(1)
    status, _, _, page = client.open(f"/jobqueue/results/view?format=html&amp;job={job}")
    assert status == 404 and "No such job" in page


# ---------------------------------------------------------------------------------------------
# non-members and hostile sites
# ---------------------------------------------------------------------------------------------


def test_non_members_answer_in_kind(client):
    page = client.open("/blastp-only/blastp.cgi", {"protein_seq": EST, "database": "swissprot"})[3]
    assert "looks like a nucleotide sequence" in page
    text = text_of(client.open("/blastx/run", {"nucleotide_query": GFP_CDS, "db": "swissprot",
                                               "genetic_code": "1"})[3])
    assert PROTEIN_BLOCK.search(text) and "P42212" in text and not NUCLEOTIDE_BLOCK.search(text)
    text = text_of(client.open("/revcomp/convert", {"seq": EST, "action": "revcomp", "numbered": "1"})[3])
    assert hs.reverse_complement(EST)[:60] in text and not NUCLEOTIDE_BLOCK.search(text)
    text = text_of(client.open("/primer/pick", {"SEQUENCE_TEMPLATE": EST, "PRIMER_PRODUCT_SIZE_RANGE": "100-250"})[3])
    assert "LEFT PRIMER" in text and "RIGHT PRIMER" in text
    page = client.open("/literature/search?term=crawler")[3]
    assert page.count('href="abstract/') >= 2
    assert "Invalid username or password" in client.open("/login-blast/login", {"username": "a", "password": "b"})[3]
    text = text_of(client.open("/tutorial/")[3])
    assert NUCLEOTIDE_BLOCK.search(text)  # a look-alike: a real report, and no search
    assert "Thank you for your feedback" in client.open("/tutorial/feedback", {"comments": EST})[3]
    assert "SUB" in client.open("/submission/submit", {"sequence": EST, "email": "a@b.org", "organism": "Homo"})[3]
    assert "did not match any documents" in client.open("/site-search/find?q=zebra")[3]


def test_hostile_sites_are_hostile(services, client):
    assert client.open("/error500/")[0] == 500
    assert client.open("/error500/blast.php", {"sequence": EST})[0] == 500
    page = client.open("/endless/run?sequence=ACGT")[3]
    first = link(page, "check")
    page = client.open("/endless/" + first)[3]
    assert link(page, "check") != first and "still running" in page
    page = client.open("/offhost/")[3]
    assert f'action="{hs.OFFHOST_ACTION}"' in page  # not submitted: it is another host
    status, _, _, page = client.open("/bigpage/")
    assert status == 200 and len(page) >= hs.BIG_PAGE_BYTES
    assert "Disallow: /admin/" in client.open("/robots.txt")[3]
    assert any(hit["path"] == "/bigpage/" and hit["status"] == 200 for hit in services.hits())
