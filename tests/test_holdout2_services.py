"""Hold-out set 2 (holdout/holdout2_services.py): every member answers a person's submission.

Each member's form is fetched, filled in and posted with urllib as a browser would (multipart
where the form says so), then waiting pages are followed through their refresh until the answer:
a real BLAST report with an alignment of the class's example sequence. Neighbours answer too,
without a BLAST alignment.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not (shutil.which("blastn") and shutil.which("makeblastdb")
                                     and shutil.which("blast_formatter")),
                                reason="BLAST+ (blastn, makeblastdb, blast_formatter) is not installed")

# one worker runs this module (setup.cfg: --dist loadgroup): its module-wide set-up is paid once
pytestmark = [pytestmark, pytest.mark.xdist_group("holdout2_services")]

_spec = importlib.util.spec_from_file_location(
    "holdout2_services", Path(__file__).resolve().parent.parent / "holdout" / "holdout2_services.py")
hs_mod = sys.modules.setdefault("holdout2_services", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(hs_mod)

DNA, PROT = hs_mod.EX_DNA2, hs_mod.EX_PROT
# a nucleotide alignment line ("Query  1  ACGT...  60") followed by its match line
DNA_ALIGNMENT = re.compile(r"Query:?\s+\d+\s+[ACGTN-]{20,}\s+\d+\s*\n\s+\|[| ]{20,}")
PROT_ALIGNMENT = re.compile(r"Query\S*\s+\d+\s+[A-Z-]{20,}\s+\d+\s*\n\s+[A-Z+ ]{20,}\n")
SCORE = re.compile(r"Score\s*[=:]?\s*\d")


@pytest.fixture(scope="module")
def hs():
    with hs_mod.Holdout2Services() as services:
        yield services


def fetch(url: str, data: dict | None = None, multipart: bool = False) -> tuple[str, str]:
    """(final URL, text) of a GET, or of a POST of ``data``; redirects followed."""
    headers, body = {}, None
    if data is not None and multipart:
        boundary = uuid.uuid4().hex
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                 for k, vs in data.items() for v in (vs if isinstance(vs, list) else [vs])]
        body = ("".join(parts) + f"--{boundary}--\r\n").encode()
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    elif data is not None:
        body = urllib.parse.urlencode(data, doseq=True).encode()
    with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=60) as resp:
        return resp.geturl(), resp.read().decode("utf-8", "replace")


def follow(url: str, page: str, limit: float = 25) -> str:
    """Follows <meta http-equiv="refresh"> (as a browser does) until a page without one."""
    end = time.time() + limit
    while m := re.search(r'http-equiv="refresh" content="(\d+)(?:;\s*url=([^"]+))?"', page, re.I):
        assert time.time() < end, "still waiting: " + page[-500:]
        time.sleep(min(int(m.group(1)), 2))
        url = urllib.parse.urljoin(url, (m.group(2) or url).replace("&amp;", "&"))
        url, page = fetch(url)
    return page


def form_of(hs, name: str, *fields: str) -> str:
    _, page = fetch(hs.url(name))
    for f in fields:
        assert f'name="{f}"' in page or f"name={f}" in page or f'NAME="{f}"' in page, (name, f)
    return page


def ss_db(page: str, label: str) -> str:
    return re.search(r'value="([0-9a-f]{32})"[^>]*> ' + re.escape(label), page).group(1)


def submit_ncbi(hs, program: str, query: str, db: str) -> str:
    name = "ncbi" if program == "blastn" else "ncbi_blastp"
    form_of(hs, name, "QUERY", "DATABASE", "PROGRAM", "CMD")
    url, page = fetch(hs.base + "/ncbi/Blast.cgi", {"QUERY": query, "DATABASE": db, "PROGRAM": program,
                                                    "PAGE_TYPE": "BlastSearch", "CMD": "Put", "EXPECT": "0.05",
                                                    "FILTER": "L"}, multipart=True)
    rid = re.search(r'name="RID" value="(\w+)"', page).group(1)
    url, page = fetch(hs.base + "/ncbi/Blast.cgi", {"CMD": "Get", "RID": rid, "FORMAT_TYPE": "HTML"})
    return follow(url, page)


def submit_ebi(hs, name: str, program: str, query: str, db: str) -> str:
    form_of(hs, name, "database", "sequence", "program", "stype")
    url, page = fetch(hs.base + "/ebi/Tools/services/web_ncbiblast/toolform.ebi",
                      {"tool": "ncbiblast", "database": db, "sequence": query, "program": program,
                       "stype": "dna" if program == "blastn" else "protein", "exp": "10"}, multipart=True)
    return follow(url, page)


def submit_ss(hs, query: str, label: str) -> str:
    db = ss_db(form_of(hs, "sequenceserver", "sequence", "databases[]", "advanced"), label)
    url, page = fetch(hs.url("sequenceserver"), {"sequence": query, "databases[]": db, "advanced": "",
                                                 "method": ""})
    return follow(url, page)


def submit_flybase(hs, program: str, query: str, db: str) -> str:
    form_of(hs, "flybase", "program", "database", "sequence")
    return fetch(hs.base + "/flybase/blast/", {"program": program, "database": db, "sequence": query,
                                               "expect": "10", "filter": "1"})[1]


def submit_wormbase(hs, program: str, query: str, db: str) -> str:
    form_of(hs, "wormbase", "query_sequence", "query_type", "blast_app", "database")
    return fetch(hs.base + "/wormbase/tools/blast_blat/run",
                 {"query_sequence": query, "query_type": "nucl" if program == "blastn" else "prot",
                  "search_type": "blast", "blast_app": program, "blast_e_value": "1E+0", "database": db,
                  "process_query": "1", "submit": "Submit"}, multipart=True)[1]


def submit_viroblast(hs, program: str, query: str, db: str) -> str:
    form_of(hs, "viroblast", "querySeq", "program", "patientIDarray[]")
    url, page = fetch(hs.base + "/viroblast/blastresult.php", {"querySeq": query, "program": program,
                                                               "patientIDarray[]": db, "expect": "10",
                                                               "blast_flag": "1"}, multipart=True)
    return follow(url, page)


def submit_wwwblast(hs, program: str, query: str, db: str) -> str:
    form_of(hs, "wwwblast", "PROGRAM", "DATALIB", "SEQUENCE")
    return fetch(hs.base + "/wwwblast/blast.cgi", {"PROGRAM": program, "DATALIB": db, "SEQUENCE": query,
                                                   "EXPECT": "10", "FILTER": "L", "DESCRIPTIONS": "100",
                                                   "ALIGNMENTS": "50"}, multipart=True)[1]


def submit_uniprot(hs, query: str) -> str:
    form_of(hs, "uniprot", "query", "dataset", "threshold")
    url, page = fetch(hs.base + "/uniprot/blast/", {"query": query, "dataset": "uniprotkb_refprotswissprot",
                                                    "threshold": "10", "matrix": "auto", "numal": "250"})
    return follow(url, page)


NUCLEOTIDE = {
    "ncbi": lambda hs: submit_ncbi(hs, "blastn", DNA, "nt"),
    "ebi": lambda hs: submit_ebi(hs, "ebi", "blastn", DNA, "em_rel"),
    "sequenceserver": lambda hs: submit_ss(hs, DNA, "Sequences from GenBank"),
    "flybase": lambda hs: submit_flybase(hs, "blastn", DNA, "dmel-all-chromosome"),
    "wormbase": lambda hs: submit_wormbase(hs, "blastn", DNA, "c_elegans_PRJNA13758_genomic"),
    "viroblast": lambda hs: submit_viroblast(hs, "blastn", DNA, "hiv_nt"),
    "wwwblast": lambda hs: submit_wwwblast(hs, "blastn", DNA, "nt"),
}
PROTEIN = {
    "ncbi_blastp": lambda hs: submit_ncbi(hs, "blastp", PROT, "nr"),
    "ebi_protein": lambda hs: submit_ebi(hs, "ebi_protein", "blastp", PROT, "uniprotkb_swissprot"),
    "sequenceserver": lambda hs: submit_ss(hs, PROT, "HX-R1 annotated proteins"),
    "flybase": lambda hs: submit_flybase(hs, "blastp", PROT, "dmel-all-translation"),
    "wormbase": lambda hs: submit_wormbase(hs, "blastp", PROT, "c_elegans_PRJNA13758_protein"),
    "viroblast": lambda hs: submit_viroblast(hs, "blastp", PROT, "viral_prot"),
    "wwwblast": lambda hs: submit_wwwblast(hs, "blastp", PROT, "swissprot"),
    "uniprot": lambda hs: submit_uniprot(hs, PROT),
}


NEIGHBOURS = {
    "uniprot": lambda hs: submit_uniprot(hs, hs_mod.EX_DNA1),  # searched with blastx: a protein alignment
    "translate": lambda hs: fetch(hs.url("translate"), {"dna_sequence": DNA, "output_format": "nucleotide"})[1],
    "orffinder": lambda hs: fetch(hs.url("orffinder"), {"SEQUENCE": hs_mod.EX_DNA1, "ORF_SIZE": "75",
                                                        "START_CODON": "0", "GCODE": "1"})[1],
    "img": lambda hs: fetch(hs.url("img"))[1],
    "bankit": lambda hs: fetch(hs.url("bankit"), {"email": "example@hotmail.com", "sequence": DNA,
                                                  "organism": "Danio rerio", "mol_type": "mRNA"})[1],
    "entrez": lambda hs: fetch(hs.base + "/entrez/search?" + urllib.parse.urlencode({"db": "nuccore",
                                                                                     "term": DNA}))[1],
}


@pytest.fixture(scope="module")
def answers(hs):
    """Every submission, made concurrently (the waiting pages take seconds each)."""
    jobs = {("dna", n): f for n, f in NUCLEOTIDE.items()} | {("protein", n): f for n, f in PROTEIN.items()}
    jobs |= {("neighbour", n): f for n, f in NEIGHBOURS.items()}
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {key: pool.submit(f, hs) for key, f in jobs.items()}
        return {key: fut.result() for key, fut in futures.items()}


def test_members_are_listed(hs):
    assert sorted(NUCLEOTIDE) == sorted(hs_mod.MEMBERS["nucleotide_blast"])
    assert sorted(PROTEIN) == sorted(hs_mod.MEMBERS["protein_blast"])
    assert hs.hostile == [] and hs.base.startswith("http://127.0.0.1:")
    for cls, urls in hs.members.items():
        assert not set(urls) & set(hs.non_members[cls]), cls
    _, robots = fetch(hs.base + "/robots.txt")
    assert robots.count("Disallow:") == 1


@pytest.mark.parametrize("name", sorted(NUCLEOTIDE))
def test_nucleotide_member_answers_a_blast_report(answers, name):
    page = answers["dna", name]
    assert SCORE.search(page), page[-2000:]
    assert DNA_ALIGNMENT.search(page), page[-2000:]


@pytest.mark.parametrize("name", sorted(PROTEIN))
def test_protein_member_answers_a_blast_report(answers, name):
    page = answers["protein", name]
    assert SCORE.search(page), page[-2000:]
    assert PROT_ALIGNMENT.search(page), page[-2000:]


def test_neighbours_answer_without_a_nucleotide_alignment(hs, answers):
    for name in NEIGHBOURS:
        assert not DNA_ALIGNMENT.search(answers["neighbour", name]), name
    assert "blastx" in answers["neighbour", "uniprot"] and PROT_ALIGNMENT.search(answers["neighbour", "uniprot"])
    assert "Open Reading Frames" in answers["neighbour", "orffinder"]
    assert 'name="password"' in answers["neighbour", "img"]
    assert "No items found" in answers["neighbour", "entrez"]
    _, found = fetch(hs.base + "/entrez/search?db=nuccore&term=crawler")
    assert found.count('class="rslt"') >= 2
