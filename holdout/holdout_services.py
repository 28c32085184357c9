"""A hold-out set of local web services for DynaBot: BLAST services written the way real ones
are across the internet (not the way the prober expects), look-alikes and hostile sites.

``python holdout/holdout_services.py [--port N] [--seeds FILE]`` builds small BLAST databases in
a temporary directory, serves every service on 127.0.0.1 (a free port by default) until
Ctrl-C, and prints its base URL first, then every start page with the classes it belongs to.
``HoldoutServices`` starts that subprocess (``with HoldoutServices() as s: s.members[...]``),
as ``webrace.demo.services.Services`` does for the project's own test services; the request
log is ``/__hits`` (cleared by ``/__reset``).

Every result comes from the REAL BLAST+ programs (``blastn``, ``blastp``, ``blastx``,
``tblastn``, ``tblastx``, ``blast_formatter``, ``makeblastdb``), run without a shell, with
a timeout, at most four at a time, on bounded input (``MAX_LETTERS``, ``MAX_QUERIES``,
``MAX_BODY``), against databases built at start from the FASTA records below. The ground
truth, service by service (style, why it is realistic, member or not and why), is
``holdout/holdout_services.md``.

=================  ============================================================  ============================
name               style                                                         member of
=================  ============================================================  ============================
ncbi-select        classic CGI; selects ``p`` (default blastp) and ``lib``       nucleotide_blast,
                   (default swissprot); wrong combinations are named             protein_blast
sequenceserver     SequenceServer: ``databases[]`` checkboxes (md5 values),      nucleotide_blast,
                   one submit button per program; XML rendered by the app        protein_blast
jobqueue           job queue: meta refresh with ``&amp;``, then ``<base href>``   nucleotide_blast
                   and relative ``&amp;`` links; blast_formatter views
redirect303        Flask-like: POST answers 303 See Other; BLAST+ ``-html``      nucleotide_blast
iframe             GET form; the report is a text/plain ``<iframe>``              nucleotide_blast
download           Django-like, CSRF cookie + token; "Download the report        nucleotide_blast
                   (text)" link only
fasta-required     bare sequences refused: "input must be in FASTA format"       nucleotide_blast
upload             file upload only (``seqfile``), multipart                     nucleotide_blast
wizard             step 1 program radios, step 2 the sequence form               nucleotide_blast,
                                                                                 protein_blast
jobtitle           NCBI-like multipart form with a required job title            nucleotide_blast
tabular            a hit table from ``-outfmt 7`` (no alignments)                nucleotide_blast (decided)
nohits             organelle genomes, E <= 0.001: "No hits found" for most       nucleotide_blast
blastp-only        BLASTP only; refuses DNA                                      protein_blast
blastx             translated query vs proteins                                  none (decided)
revcomp            reverse complement, numbered ``<pre>`` echo                   none
primer             Primer3-like primer design                                    none
literature         PubMed-like literature search                                 keyword_search
login-blast        BLAST behind a login form                                     none
site-search        "Search this site" box                                        keyword_search
tutorial           BLAST tutorial with an example report; a feedback form        none
submission         GenBank-like sequence submission form                         none
error500           hostile: every request answers 500                            (hostile)
endless            hostile: "still running, click here" forever, fresh URLs      (hostile)
offhost            hostile: the form posts to http://127.0.0.2:9/                (hostile)
bigpage            hostile: a 10 MB start page (a giant organism select)         (hostile)
=================  ============================================================  ============================

``/`` links every listed service (and ``/admin/``, which robots.txt disallows); ``/ncbi/...``
answers the record links of BLAST+ ``-html`` reports, rewritten from www.ncbi.nlm.nih.gov so
that nothing here points off 127.0.0.1 (but ``offhost``, on purpose, to a closed loopback port).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from types import TracebackType

from twisted.internet import threads
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

HOST = "127.0.0.1"
CLASSES = ("nucleotide_blast", "protein_blast", "keyword_search")
ROBOTS_TXT = b"User-agent: *\nDisallow: /admin/\n"
MAX_BODY = 2 * 1024 * 1024  # bytes of a request body
MAX_LETTERS = 100_000  # letters of all query sequences together
MAX_QUERIES = 10  # sequences in one submission
BLAST_TIMEOUT = 60.0  # seconds
BLAST_SLOTS = 4  # BLAST processes at a time
MAX_JOBS = 500  # results kept per service, oldest dropped
BIG_PAGE_BYTES = 10 * 1024 * 1024
OFFHOST_ACTION = "http://127.0.0.2:9/cgi-bin/blast.cgi"  # a closed port on loopback, never a real host
SCRIPT = Path(__file__).resolve()

# ---------------------------------------------------------------------------------------------
# The sequences the databases are built from (authored here; deterministic)
# ---------------------------------------------------------------------------------------------

# Two EST fragments, the sequences of the nucleotide BLAST class description's examples. Real
# nucleotide collections hold such ESTs; ours hold them with a few substitutions, inside
# longer clones, so that a search with them finds real (imperfect) alignments.
EST_FRAGMENT_1 = (
    "CTGCATCAGTAATTTTAATAGAGACTCTTAGTGGTTATCAACAACTGGTCAGTTGTTTTTTTTTTTTTCCACACTGCTCTCTGGATTCGAACCTAG"
    "TGAATTCTGGGCTCAGTCCTCCTCCATCTCTTTCTTGATCCAGTCCACGTAGTTGAGCACTTTGGTGTAGAAGCCATAGCCCCTGCTGCACCCGATG"
    "CCCCAGGACACGATGCCCGTGGCCACCCAGCGATCAGTGTTCGGGTCCCTTACTGGAAAAACGCCCCCACTATCCCCCTGGCAGGCGTCCTGCTTTA"
    "AAGATGGGTGGCCCGCCACAAACATGTTTTGGGAAAACACAACCATTCTA")
EST_FRAGMENT_2 = ("AACTAATTGCCTCACATTGTCACTGCAAATCGACACCTATTAATGGGTCTCACCTCCCAACTGCTTCCCCCTCTGTTCTTCCTGCTAGCATG"
                  "TGCCGG")

PROTEINS = {  # UniProt sequences
    "INS": "MALWMRLLPLLALLALWGPDPAAAFVNQHLCGSHLVEALYLVCGERGFFYTPKTRREAEDLQVGQVELGGGPGAGSLQPLALEGSLQKRGIVEQCC"
           "TSICSLYQLENYCN",
    "HBB": "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLDNLKGTFATLSELHCDK"
           "LHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH",
    "UBQ": "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG",
    "GFP": "MSKGEELFTGVVPILVELDGDVNGHKFSVSGEGEGDATYGKLTLKFICTTGKLPVPWPTLVTTFSYGVQCFSRYPDHMKQHDFFKSAMPEGYVQER"
           "TIFFKDDGNYKTRAEVKFEGDTLVNRIELKGIDFKEDGNILGHKLEYNYNSHNVYIMADKQKNGIKVNFKIRHNIEDGSVQLADHYQQNTPIGDGP"
           "VLLPDNHYLSTQSALSKDPNEKRDHMVLLEFVTAAGITHGMDELYK",
    "LYZ": "MRSLLILVLCFLPLAALGKVFGRCELAAAMKRHGLDNYRGYSLGNWVCAAKFESNFNTQATNRNTDGSTDYGILQINSRWWCNDGRTPGSRNLCN"
           "IPCSALLSSDITASVNCAKKIVSDGNGMNAWVAWRNRCKGTDVQAWIRGCRL",
    "CYC": "MGDVEKGKKIFIMKCSQCHTVEKGGKHKTGPNLHGLFGRKTGQAPGYSYTAANKNKGIIWGEDTLMEYLENPKKYIPGTKMIFVGIKKKEERADL"
           "IAYLKKATNE",
}

CODONS = {"A": ("GCC", "GCT"), "R": ("CGG", "AGA"), "N": ("AAC", "AAT"), "D": ("GAC", "GAT"), "C": ("TGC", "TGT"),
          "Q": ("CAG", "CAA"), "E": ("GAG", "GAA"), "G": ("GGC", "GGA"), "H": ("CAC", "CAT"), "I": ("ATC", "ATT"),
          "L": ("CTG", "CTC"), "K": ("AAG", "AAA"), "M": ("ATG", "ATG"), "F": ("TTC", "TTT"), "P": ("CCC", "CCT"),
          "S": ("AGC", "TCC"), "T": ("ACC", "ACA"), "W": ("TGG", "TGG"), "Y": ("TAC", "TAT"), "V": ("GTG", "GTC")}


def random_dna(seed: int, length: int, gc: float = 0.5) -> str:
    rng = random.Random(seed)
    weights = ((1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2)
    return "".join(rng.choices("ACGT", weights, k=length))


def mutate(letters: str, every: int, seed: int) -> str:
    """Substitutes one base in every ``every``: a homologue, not a copy."""
    rng = random.Random(seed)
    out = list(letters)
    for pos in range(rng.randrange(every), len(out), every):
        out[pos] = rng.choice([b for b in "ACGT" if b != out[pos]])
    return "".join(out)


def back_translate(protein: str, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(CODONS[aa]) for aa in protein) + "TGA"


@dataclass(frozen=True)
class Record:
    seqid: str
    title: str
    letters: str
    databases: tuple[str, ...]

    def fasta(self) -> str:
        lines = [self.letters[i:i + 60] for i in range(0, len(self.letters), 60)]
        return f">{self.seqid} {self.title}\n" + "\n".join(lines) + "\n"


NUCLEOTIDE_RECORDS = (
    Record("BX417123.1", "Homo sapiens cDNA clone IMAGE:417123 5', mRNA sequence",
           random_dna(11, 150) + mutate(EST_FRAGMENT_1, 41, 1) + random_dna(12, 210), ("nt", "est")),
    Record("BX982201.1", "Mus musculus adult brain cDNA, clone MB-2291, partial sequence",
           random_dna(21, 320) + mutate(EST_FRAGMENT_2, 33, 2) + random_dna(22, 400), ("nt", "est")),
    Record("NM_000518.5", "Homo sapiens hemoglobin subunit beta (HBB), mRNA",
           random_dna(31, 50) + back_translate(PROTEINS["HBB"], 3) + random_dna(32, 130), ("nt", "refseq_rna")),
    Record("NM_000207.3", "Homo sapiens insulin (INS), transcript variant 1, mRNA",
           random_dna(41, 60) + back_translate(PROTEINS["INS"], 4) + random_dna(42, 80), ("nt", "refseq_rna")),
    Record("U55762.1", "Cloning vector pEGFP-N1, enhanced green fluorescent protein (egfp) gene, complete cds",
           random_dna(51, 90) + back_translate(PROTEINS["GFP"], 5) + random_dna(52, 300), ("nt",)),
    Record("J01859.1", "Escherichia coli 16S ribosomal RNA (rrsB) gene",
           random_dna(61, 1540, gc=0.53), ("nt", "rrna")),
    Record("CR388152.9", "Zebrafish DNA sequence from clone CH211-98M9 in linkage group 14, partial",
           random_dna(71, 3000, gc=0.37), ("nt",)),
    Record("NC_001573.1", "Xenopus laevis mitochondrion, partial genome",
           random_dna(81, 6000, gc=0.40), ("mito",)),
    Record("NC_024511.2", "Drosophila melanogaster mitochondrion, partial genome",
           random_dna(91, 5000, gc=0.22), ("mito",)),
)

PROTEIN_RECORDS = (
    Record("sp|P01308|INS_HUMAN", "Insulin OS=Homo sapiens OX=9606 GN=INS", PROTEINS["INS"], ("swissprot",)),
    Record("sp|P68871|HBB_HUMAN", "Hemoglobin subunit beta OS=Homo sapiens OX=9606 GN=HBB", PROTEINS["HBB"],
           ("swissprot",)),
    Record("sp|P0CG47|UBB_HUMAN", "Polyubiquitin-B (first unit) OS=Homo sapiens OX=9606 GN=UBB", PROTEINS["UBQ"],
           ("swissprot", "pdb")),
    Record("sp|P42212|GFP_AEQVI", "Green fluorescent protein OS=Aequorea victoria OX=6100 GN=GFP", PROTEINS["GFP"],
           ("swissprot", "pdb")),
    Record("sp|P00698|LYSC_CHICK", "Lysozyme C OS=Gallus gallus OX=9031 GN=LYZ", PROTEINS["LYZ"],
           ("swissprot", "pdb")),
    Record("sp|P99999|CYC_HUMAN", "Cytochrome c OS=Homo sapiens OX=9606 GN=CYCS", PROTEINS["CYC"], ("swissprot",)),
)

DATABASES = {  # name -> (BLAST type, title)
    "nt": ("nucl", "Nucleotide collection (nt)"),
    "est": ("nucl", "Expressed sequence tags (est)"),
    "refseq_rna": ("nucl", "Reference RNA sequences (refseq_rna)"),
    "rrna": ("nucl", "16S ribosomal RNA sequences"),
    "mito": ("nucl", "Organelle genomes: mitochondria"),
    "swissprot": ("prot", "UniProtKB/Swiss-Prot (swissprot)"),
    "pdb": ("prot", "Protein Data Bank proteins (pdb)"),
}
NUCLEOTIDE_DBS = tuple(name for name, (kind, _) in DATABASES.items() if kind == "nucl")
PROTEIN_DBS = tuple(name for name, (kind, _) in DATABASES.items() if kind == "prot")
PROGRAMS = {  # program -> (query type, database type)
    "blastn": ("nucl", "nucl"), "blastp": ("prot", "prot"), "blastx": ("nucl", "prot"),
    "tblastn": ("prot", "nucl"), "tblastx": ("nucl", "nucl"),
}


def record(seqid: str) -> Record:
    return next(r for r in NUCLEOTIDE_RECORDS + PROTEIN_RECORDS if r.seqid == seqid)


# ---------------------------------------------------------------------------------------------
# Running BLAST
# ---------------------------------------------------------------------------------------------


class BlastError(Exception):
    """BLAST failed or took too long: what to tell the user."""


class Engine:
    """The databases (built in ``root``) and the BLAST+ programs that search them."""

    def __init__(self, root: Path) -> None:
        if " " in str(root):
            raise RuntimeError(f"the database directory may not contain spaces: {root}")
        self.root = root
        self.exe = {name: shutil.which(name) for name in (*PROGRAMS, "blast_formatter", "makeblastdb")}
        missing = [name for name, path in self.exe.items() if path is None]
        if missing:
            raise RuntimeError(f"BLAST+ programs not found on PATH: {', '.join(missing)}")
        self.slots = threading.BoundedSemaphore(BLAST_SLOTS)
        self.env = {"PATH": os.environ.get("PATH", ""), "BLASTDB": str(root), "LC_ALL": "C"}  # databases by name
        self.ids = {name: hashlib.md5(name.encode()).hexdigest() for name in DATABASES}  # SequenceServer's ids
        for name, (kind, title) in DATABASES.items():
            records = NUCLEOTIDE_RECORDS if kind == "nucl" else PROTEIN_RECORDS
            fasta = root / f"{name}.fasta"
            fasta.write_text("".join(r.fasta() for r in records if name in r.databases), encoding="ascii")
            subprocess.run([self.exe["makeblastdb"], "-in", str(fasta), "-dbtype", kind, "-parse_seqids",
                            "-title", title, "-out", str(root / name)],
                           check=True, capture_output=True, timeout=120)
        (root / "jobs").mkdir()

    def _run(self, cmd: list[str], stdin: str = "") -> str:
        with self.slots:
            try:
                done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=BLAST_TIMEOUT,
                                      cwd=self.root, env=self.env)
            except subprocess.TimeoutExpired:
                raise BlastError(f"the search took longer than {BLAST_TIMEOUT:.0f} s and was stopped") from None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            raise BlastError(lines[-1] if lines else f"{Path(cmd[0]).name} failed ({done.returncode})")
        return done.stdout

    def run(self, program: str, fasta: str, databases: Sequence[str], *, outfmt: str = "0", html: bool = False,
            options: Sequence[str] = ()) -> str:
        """BLAST ``fasta`` (one or more queries) against ``databases`` of the type ``program`` needs."""
        if program not in PROGRAMS:
            raise BlastError(f"unknown program {program}")
        wanted = PROGRAMS[program][1]
        if not databases or any(DATABASES.get(db, ("",))[0] != wanted for db in databases):
            raise BlastError(f"{program} searches {'nucleotide' if wanted == 'nucl' else 'protein'} databases")
        cmd = [self.exe[program], "-db", " ".join(databases), "-outfmt", outfmt, *options]
        if html:
            cmd.append("-html")
        return local_links(self._run(cmd, fasta)) if html else self._run(cmd, fasta)

    def archive(self, program: str, fasta: str, databases: Sequence[str], options: Sequence[str] = ()) -> Path:
        """A search saved as a BLAST archive (``-outfmt 11``), to format later with ``format``."""
        path = self.root / "jobs" / f"{secrets.token_hex(8)}.asn"
        path.write_text(self.run(program, fasta, databases, outfmt="11", options=options), encoding="utf-8")
        return path

    def format(self, archive: Path, *, outfmt: str = "0", html: bool = False) -> str:
        cmd = [self.exe["blast_formatter"], "-archive", str(archive), "-outfmt", outfmt]
        if html:
            cmd.append("-html")
        return local_links(self._run(cmd)) if html else self._run(cmd)


def local_links(report: str) -> str:
    """BLAST+ ``-html`` links records to www.ncbi.nlm.nih.gov: keep them on this host."""
    return re.sub(r"https?://www\.ncbi\.nlm\.nih\.gov/", "/ncbi/", report)


def html_report_body(report: str) -> str:
    """The part of a BLAST+ ``-html`` document between ``<BODY>`` and ``</BODY>``."""
    body = re.split(r"<BODY[^>]*>", report, maxsplit=1, flags=re.I)[-1]
    return re.split(r"</BODY>", body, maxsplit=1, flags=re.I)[0]


# ---------------------------------------------------------------------------------------------
# Query sequences: what a submitted text holds
# ---------------------------------------------------------------------------------------------

IUPAC_NUCLEOTIDES = frozenset("ACGTUNRYKMSWBDHV")
AMINO_ACIDS = frozenset("ACDEFGHIKLMNPQRSTVWYBZXUOJ")


class Problem(Exception):
    """An answer other than the result: the status and what the page says."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Query:
    title: str  # the FASTA defline, "" for a bare sequence
    letters: str

    @property
    def kind(self) -> str:
        """"nucl" or "prot", as BLAST web forms guess it: mostly A, C, G, T (U, N) is nucleotide."""
        core = [c for c in self.letters if c not in "-*"]
        acgt = sum(c in "ACGTUN" for c in core)
        return "nucl" if core and acgt >= 0.9 * len(core) else "prot"


def read_queries(text: str) -> tuple[list[Query], bool]:
    """(the sequences, whether the text was FASTA) of a submitted text; whitespace and digits
    (GenBank-style numbering) are dropped, as BLAST servers do. Raises Problem for a text that
    is no sequence at all; the caller words the other errors its own way."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        raise Problem(200, "No query sequence was entered.")
    is_fasta = text.startswith(">")
    queries: list[Query] = [] if is_fasta else [Query("", "")]
    for line in text.split("\n"):
        if line.startswith(">"):
            queries.append(Query(line[1:].strip(), ""))
            continue
        letters = re.sub(r"[\s\d]+", "", line).upper()
        bad = re.search(r"[^A-Z*\-]", letters)
        if bad:
            raise Problem(200, f"Invalid character '{bad.group()}' in the query sequence.")
        queries[-1].letters += letters
    if len(queries) > MAX_QUERIES:
        raise Problem(200, f"Too many sequences: {len(queries)} (at most {MAX_QUERIES} at a time).")
    total = sum(len(q.letters) for q in queries)
    if total > MAX_LETTERS:
        raise Problem(200, f"The query is too long: {total:,} letters (the limit is {MAX_LETTERS:,}).")
    empty = next((q for q in queries if not q.letters), None)
    if empty is not None:
        raise Problem(200, f"Sequence {empty.title or '1'} is empty." if empty.title else "The query is empty.")
    return queries, is_fasta


def check_alphabet(queries: list[Query], kind: str) -> None:
    allowed = IUPAC_NUCLEOTIDES if kind == "nucl" else AMINO_ACIDS
    for q in queries:
        bad = sorted(set(q.letters) - allowed - {"-", "*"})
        if bad:
            raise Problem(200, f"Invalid {'nucleotide' if kind == 'nucl' else 'protein'} sequence: "
                               f"'{''.join(bad)}' {'is not a' if len(bad) == 1 else 'are not'} valid "
                               f"{'base' if kind == 'nucl' else 'residue'} code{'' if len(bad) == 1 else 's'}.")


def to_fasta(queries: list[Query]) -> str:
    out = []
    for n, q in enumerate(queries, 1):
        out.append(f">{q.title or f'Query_{n}'}\n")
        out += [q.letters[i:i + 60] + "\n" for i in range(0, len(q.letters), 60)]
    return "".join(out)


def reverse_complement(letters: str) -> str:
    pairs = str.maketrans("ACGTUNRYKMSWBDHV", "TGCAANYRMKSWVHDB")
    return letters.translate(pairs)[::-1]


def number_lines(letters: str, width: int = 60, start: int = 1) -> list[tuple[int, str, int]]:
    return [(start + i, letters[i:i + width], start + min(i + width, len(letters)) - 1)
            for i in range(0, len(letters), width)]


# ---------------------------------------------------------------------------------------------
# HTTP: requests handled in threads (BLAST takes time), answers written by the reactor
# ---------------------------------------------------------------------------------------------


@dataclass
class Req:
    method: str
    path: str  # below the service's prefix
    args: dict[str, list[str]]
    headers: dict[str, str]
    cookies: dict[str, str]
    host: str  # the Host header: "127.0.0.1:PORT"
    prefix: str  # "/name/"

    def get(self, name: str, default: str = "") -> str:
        values = self.args.get(name)
        return values[0] if values else default

    def getall(self, name: str) -> list[str]:
        return self.args.get(name, [])

    @property
    def multipart(self) -> bool:
        return self.headers.get("content-type", "").startswith("multipart/form-data")


@dataclass
class Resp:
    body: str | bytes
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def redirect(location: str, status: int = 302, body: str = "") -> Resp:
    return Resp(body or f'<p>Moved: <a href="{escape(location)}">{escape(location)}</a></p>', status,
                headers=[("Location", location)])


def methods(req: Req, *allowed: str) -> None:
    accepted = set(allowed) | ({"HEAD"} if "GET" in allowed else set())
    if req.method not in accepted:
        raise Problem(405, f"Method {req.method} is not allowed for this URL.")


class Service(Resource):
    """One service under its own prefix. ``routes``: (regex over the path below the prefix,
    method name); the method gets the Req and the regex's groups, and returns a Resp, a whole
    page (str starting with ``<!DOCTYPE`` or ``<html``), or the body of one (str, put in the
    service's layout by ``page``)."""

    isLeaf = True
    title = ""
    routes: tuple[tuple[str, str], ...] = (("", "start"),)

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine
        self.lock = threading.Lock()
        self._routes = [(re.compile(pattern), name) for pattern, name in self.routes]

    # the look of the site
    def page(self, title: str, body: str) -> str:
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
                f"</head>\n<body>\n<h1>{escape(title)}</h1>\n{body}\n</body></html>\n")

    def error(self, problem: Problem) -> Resp:
        return Resp(self.page("Error", f'<p class="error">{escape(problem.message)}</p>'), problem.status)

    # plumbing
    def render(self, request: Request) -> bytes | int:
        if not request.postpath:  # /name -> /name/: relative actions resolve under the prefix
            request.setResponseCode(301)
            request.setHeader(b"Location", request.prePathURL() + b"/")
            return b""
        request.content.seek(0, 2)
        size = request.content.tell()
        request.content.seek(0)
        req = Req(request.method.decode("latin-1").upper(),
                  "/".join(p.decode("utf-8", "replace") for p in request.postpath),
                  {k.decode("utf-8", "replace"): [v.decode("utf-8", "replace") for v in vs]
                   for k, vs in request.args.items()},
                  {k.decode("latin-1").lower(): b", ".join(vs).decode("latin-1")
                   for k, vs in request.requestHeaders.getAllRawHeaders()},
                  {k.decode("latin-1"): v.decode("latin-1") for k, v in request.received_cookies.items()},
                  (request.getHeader(b"host") or f"{HOST}:{request.getHost().port}".encode()).decode("latin-1"),
                  "/" + "/".join(p.decode("utf-8", "replace") for p in request.prepath) + "/")
        gone: list[bool] = []
        request.notifyFinish().addErrback(lambda _: gone.append(True))
        if size > MAX_BODY:
            self._write(Resp(self.page("Request Entity Too Large", "<p>The submission is too large.</p>"), 413),
                        request, gone)
        else:
            deferred = threads.deferToThread(self.respond, req)
            deferred.addCallback(self._write, request, gone)
            deferred.addErrback(lambda failure: (failure.printTraceback(file=sys.stderr),
                                                 self._write(Resp("Internal Server Error", 500, "text/plain"),
                                                             request, gone)))
        return NOT_DONE_YET

    def respond(self, req: Req) -> Resp:
        for pattern, name in self._routes:
            match = pattern.fullmatch(req.path)
            if match:
                try:
                    answer = getattr(self, name)(req, *match.groups())
                except Problem as problem:
                    return self.error(problem)
                except BlastError as failure:
                    return self.error(Problem(500, f"BLAST failed: {failure}"))
                except Exception:  # a real server's 500
                    traceback.print_exc(file=sys.stderr)
                    return Resp("<h1>Internal Server Error</h1>", 500)
                if isinstance(answer, Resp):
                    return answer
                whole = answer.lstrip()[:20].upper().startswith(("<!DOCTYPE", "<HTML"))
                return Resp(answer if whole else self.page(self.title, answer))
        return self.error(Problem(404, f"Not Found: {req.prefix}{req.path}"))

    @staticmethod
    def _write(resp: Resp, request: Request, gone: list[bool]) -> None:
        if gone:
            return
        body = resp.body.encode("utf-8") if isinstance(resp.body, str) else resp.body
        request.setResponseCode(resp.status)
        request.setHeader(b"Content-Type", resp.content_type.encode())
        for name, value in resp.headers:
            request.responseHeaders.addRawHeader(name.encode("latin-1"), value.encode("latin-1"))
        request.setHeader(b"Content-Length", str(len(body)).encode())
        request.write(body)
        request.finish()

    # results kept for later pages
    def keep(self, store: OrderedDict, key: str, value: object) -> None:
        with self.lock:
            store[key] = value
            while len(store) > MAX_JOBS:
                store.popitem(last=False)


def options_html(items: Sequence[tuple[str, str]], selected: str = "") -> str:
    return "".join(f'<option value="{escape(v)}"{" selected" if v == selected else ""}>{escape(label)}</option>'
                   for v, label in items)


def pre(text: str) -> str:
    return f"<pre>{escape(text, quote=False)}</pre>"


# ---------------------------------------------------------------------------------------------
# Layouts: each site has its own look
# ---------------------------------------------------------------------------------------------


def classic_page(banner: str, title: str, body: str, footer: str) -> str:
    """A 1990s CGI site: HTML 3.2, upper-case tags, a coloured table for a banner."""
    return f"""<HTML>
<HEAD>
<TITLE>{escape(title)}</TITLE>
</HEAD>
<BODY BGCOLOR="#FFFFFF" TEXT="#000000" LINK="#0000CC" VLINK="#551A8B">
<TABLE WIDTH="100%" BORDER=0 CELLSPACING=0 CELLPADDING=6>
<TR><TD BGCOLOR="#336699"><FONT FACE="Arial,Helvetica" COLOR="#FFFFFF" SIZE="+2">
<B>{escape(banner)}</B></FONT></TD></TR>
</TABLE>
<H2>{escape(title)}</H2>
{body}
<HR>
<ADDRESS>{footer}</ADDRESS>
</BODY>
</HTML>
"""


def modern_page(brand: str, title: str, body: str, nav: Sequence[tuple[str, str]] = (), blast: bool = True) -> str:
    """A Bootstrap-era site: navbar, container, cards."""
    powered = " Powered by NCBI BLAST+ 2.12.0." if blast else ""
    home = nav[0][0] if nav else "./"
    links = "".join(f'<li class="nav-item"><a class="nav-link" href="{href}">{escape(text)}</a></li>'
                    for href, text in nav)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} | {escape(brand)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:0}}.navbar{{background:#212529;padding:.5rem 1rem}}
.navbar a{{color:#fff;text-decoration:none;margin-right:1rem}}.container{{max-width:1100px;margin:1rem auto}}
.alert-danger{{background:#f8d7da;border:1px solid #f5c2c7;padding:.75rem}}pre{{background:#f8f9fa;padding:.5rem}}
table.table td,table.table th{{border-bottom:1px solid #dee2e6;padding:.25rem .5rem;text-align:left}}</style>
</head>
<body>
<nav class="navbar"><a class="navbar-brand" href="{home}">{escape(brand)}</a><ul class="navbar-nav">{links}</ul></nav>
<main class="container">
<h1 class="h3">{escape(title)}</h1>
{body}
</main>
<footer class="container text-muted"><small>&copy; 2023 {escape(brand)}.{powered}</small></footer>
</body>
</html>
"""


# ---------------------------------------------------------------------------------------------
# Nucleotide BLAST services
# ---------------------------------------------------------------------------------------------


class ClassicSelects(Service):
    """A 1998-style wwwblast page: selects named ``p`` and ``lib`` whose defaults (blastp,
    swissprot) are for proteins; bad combinations are explained, as wwwblast does."""

    title = "BLAST Search"
    routes = (("", "start"), ("cgi-bin/blast.cgi", "run"))
    programs = (("blastp", "blastp - protein query vs. protein database"),
                ("blastn", "blastn - nucleotide query vs. nucleotide database"),
                ("blastx", "blastx - translated nucleotide query vs. protein database"),
                ("tblastn", "tblastn - protein query vs. translated nucleotide database"),
                ("tblastx", "tblastx - translated nucleotide query vs. translated nucleotide database"))
    libraries = (("swissprot", "SWISS-PROT protein sequences"), ("pdb", "PDB protein structures"),
                 ("nt", "GenBank nucleotide (nt)"), ("est", "dbEST (nucleotide)"),
                 ("refseq_rna", "RefSeq RNA (nucleotide)"))

    def page(self, title: str, body: str) -> str:
        return classic_page("Bioinformatics Core Facility", title, body,
                            'Questions? Mail <A HREF="mailto:blast-admin@example.org">blast-admin@example.org</A>. '
                            "Last modified: March 3, 1999")

    def start(self, req: Req) -> str:
        return f"""<P>This server runs the NCBI BLAST programs against local copies of the public databases.
See the <A HREF="/tutorial/">BLAST tutorial</A> for help.</P>
<FORM ACTION="cgi-bin/blast.cgi" METHOD="POST" NAME="blastform">
<TABLE BORDER=0>
<TR><TD><B>Program</B></TD><TD><SELECT NAME="p">{options_html(self.programs, "blastp")}</SELECT></TD></TR>
<TR><TD><B>Database</B></TD><TD><SELECT NAME="lib">{options_html(self.libraries, "swissprot")}</SELECT></TD></TR>
</TABLE>
<P>Enter your sequence below (raw sequence or FASTA format):<BR>
<TEXTAREA NAME="SEQ" ROWS=10 COLS=72></TEXTAREA></P>
<P>Expect <SELECT NAME="E">{options_html([(e, e) for e in ("0.0001", "0.01", "1", "10", "100")], "10")}</SELECT>
&nbsp; <INPUT TYPE="checkbox" NAME="F" VALUE="T" CHECKED> Filter low-complexity regions
&nbsp; Alignments to show <SELECT NAME="B">{options_html([(b, b) for b in ("10", "50", "100")], "50")}</SELECT></P>
<P><INPUT TYPE="submit" VALUE="Submit query"> <INPUT TYPE="reset" VALUE="Clear"></P>
</FORM>"""

    def run(self, req: Req) -> str:
        methods(req, "GET", "POST")  # an old CGI: it reads either
        program, lib = req.get("p"), req.get("lib")
        if program not in PROGRAMS:
            raise Problem(200, f"Unknown program: {program or '(none)'}")
        if lib not in DATABASES or lib not in dict(self.libraries):
            raise Problem(200, f"Unknown database: {lib or '(none)'}")
        want_query, want_db = PROGRAMS[program]
        have_db = DATABASES[lib][0]
        if have_db != want_db:
            raise Problem(200, f"Database {lib} is a {'protein' if have_db == 'prot' else 'nucleotide'} database: "
                               f"choose a {'protein' if want_db == 'prot' else 'nucleotide'} database for {program}.")
        queries, _ = read_queries(req.get("SEQ"))
        kind = queries[0].kind
        if kind != want_query:
            raise Problem(200, f"Your query looks like a {'protein' if kind == 'prot' else 'nucleotide'} sequence, "
                               f"but {program} needs a {'protein' if want_query == 'prot' else 'nucleotide'} query.")
        check_alphabet(queries, kind)
        try:
            expect = float(req.get("E", "10"))
        except ValueError:
            raise Problem(200, "Expect must be a number.") from None
        shown = req.get("B", "50")
        options = ["-evalue", str(expect), "-num_alignments", shown if shown.isdigit() else "50"]
        if program == "blastn":
            options += ["-task", "blastn", "-dust", "yes" if req.get("F") else "no"]
        elif program in ("blastp", "tblastn"):
            options += ["-seg", "yes" if req.get("F") else "no"]
        report = self.engine.run(program, to_fasta(queries), [lib], options=options)
        return f'<P><A HREF="../">New search</A></P>\n<PRE>\n{report.replace("&", "&amp;").replace("<", "&lt;")}</PRE>'


class SequenceServerLike(Service):
    """SequenceServer: databases as checkboxes with md5 ids, one submit button per program,
    an "advanced parameters" box, and a report the app renders itself from BLAST's XML."""

    title = "SequenceServer"
    routes = (("", "start"),)
    buttons = ("blastn", "tblastx", "blastx", "blastp", "tblastn")
    advanced_allowed = {"-evalue": float, "-num_alignments": int, "-word_size": int, "-max_target_seqs": int}

    def page(self, title: str, body: str) -> str:
        return modern_page("SequenceServer", title, body, (("./", "New search"), ("/tutorial/", "Help")))

    def error(self, problem: Problem) -> Resp:
        return Resp(self.page("Error", f'<div class="alert alert-danger"><strong>{escape(problem.message)}</strong>'
                                       '</div><p><a href="./">Back to the search form</a></p>'), problem.status)

    def start(self, req: Req) -> str | Resp:
        if req.method == "POST":
            return self.search(req)
        methods(req, "GET")
        groups = []
        for kind, heading in (("nucl", "Nucleotide databases"), ("prot", "Protein databases")):
            boxes = "".join(
                f'<div class="form-check"><input class="form-check-input" type="checkbox" name="databases[]" '
                f'value="{self.engine.ids[name]}" id="{self.engine.ids[name]}" data-type="{kind}">'
                f'<label class="form-check-label" for="{self.engine.ids[name]}">{escape(title)}</label></div>'
                for name, (k, title) in DATABASES.items() if k == kind and name != "mito")
            groups.append(f'<div class="col-md-6"><h4>{heading}</h4>{boxes}</div>')
        buttons = " ".join(f'<button type="submit" class="btn btn-primary" name="method" value="{p}">{p.upper()}'
                           "</button>" for p in self.buttons)
        return f"""<form method="post" action="" id="blast">
<div class="form-group">
<textarea class="form-control" name="sequence" id="sequence" rows="8" spellcheck="false" autofocus
 placeholder="Paste query sequence(s) or drag file containing query sequence(s) in FASTA format here ..."></textarea>
</div>
<div class="row">{"".join(groups)}</div>
<div class="form-group"><label for="advanced">Advanced parameters:</label>
<input type="text" class="form-control" name="advanced" id="advanced"
 placeholder="eg: -evalue 1.0e-5 -num_alignments 100">
</div>
<div class="btn-group">{buttons}</div>
</form>"""

    def search(self, req: Req) -> str:
        ids = {v: k for k, v in self.engine.ids.items()}
        text = req.get("sequence")
        if not text.strip():
            raise Problem(400, "Query sequence(s) missing: paste a sequence or drop a FASTA file.")
        chosen = [ids.get(value) for value in req.getall("databases[]")]
        if not chosen:
            raise Problem(400, "No database selected: select one or more databases to search.")
        if None in chosen:
            raise Problem(400, "Database id not recognised.")
        method = req.get("method")
        if method not in self.buttons:
            raise Problem(400, "No BLAST method specified." if not method else f"Unknown BLAST method: {method}")
        kinds = {DATABASES[db][0] for db in chosen}
        if len(kinds) > 1:
            raise Problem(400, "Selected databases are of different type: search nucleotide and protein "
                               "databases separately.")
        want_query, want_db = PROGRAMS[method]
        if kinds != {want_db}:
            raise Problem(400, f"{method.upper()} cannot search {'protein' if want_db == 'nucl' else 'nucleotide'} "
                               f"databases ({', '.join(DATABASES[db][1] for db in chosen)}).")
        try:
            queries, _ = read_queries(text)
        except Problem as problem:
            raise Problem(400, problem.message) from None
        kinds = {q.kind for q in queries}
        if len(kinds) > 1:
            raise Problem(400, "Query sequences are of different type: nucleotide and protein mixed.")
        if kinds != {want_query}:
            raise Problem(400, f"{method.upper()} needs {'nucleotide' if want_query == 'nucl' else 'protein'} "
                               f"queries; yours look like {'protein' if want_query == 'nucl' else 'nucleotide'}.")
        try:
            check_alphabet(queries, want_query)
        except Problem as problem:
            raise Problem(400, problem.message) from None
        options = self.advanced(req.get("advanced"))
        xml = self.engine.run(method, to_fasta(queries), chosen, outfmt="5", options=options)
        return self.render_xml(xml, method, chosen)

    def advanced(self, text: str) -> list[str]:
        words = text.split()
        if len(words) % 2:
            raise Problem(400, f"Advanced parameters: option {words[-1]} needs a value.")
        options = []
        for name, value in zip(words[::2], words[1::2], strict=True):
            kind = self.advanced_allowed.get(name)
            if kind is None:
                raise Problem(400, f"Advanced parameters: {name} is not allowed.")
            try:
                kind(value)
            except ValueError:
                raise Problem(400, f"Advanced parameters: {name} {value} is not a number.") from None
            options += [name, value]
        return options

    def render_xml(self, xml: str, method: str, databases: list[str]) -> str:
        root = ET.fromstring(xml)
        q_step = 3 if method in ("blastx", "tblastx") else 1
        s_step = 3 if method in ("tblastn", "tblastx") else 1
        parts = [f'<p class="text-muted">{escape(root.findtext("BlastOutput_version", ""))}; '
                 f'databases: {escape(", ".join(DATABASES[db][1] for db in databases))}</p>']
        for n, it in enumerate(root.iter("Iteration"), 1):
            name = it.findtext("Iteration_query-def", "") or f"Query_{n}"
            parts.append(f'<div class="query" id="Query_{n}"><h3>Query= {escape(name)} '
                         f'<small>length={escape(it.findtext("Iteration_query-len", ""))}</small></h3>')
            hits = it.findall("Iteration_hits/Hit")
            if not hits:
                parts.append('<p class="no-hits"><strong>****** No hits found ******</strong></p></div>')
                continue
            rows = []
            for h, hit in enumerate(hits, 1):
                hsp = hit.find("Hit_hsps/Hsp")
                rows.append(f'<tr><td>{h}</td><td><a href="#Query_{n}_hit_{h}">{escape(self.hit_id(hit))}</a> '
                            f'{escape(hit.findtext("Hit_def", ""))}</td>'
                            f'<td>{float(hsp.findtext("Hsp_bit-score", "0")):.1f}</td>'
                            f'<td>{float(hsp.findtext("Hsp_evalue", "0")):.2g}</td></tr>')
            parts.append('<table class="table"><thead><tr><th>#</th><th>Similar sequences</th><th>Score</th>'
                         f'<th>E value</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
            for h, hit in enumerate(hits, 1):
                parts.append(f'<div class="hit" id="Query_{n}_hit_{h}"><h4>{h}. {escape(self.hit_id(hit))} '
                             f'{escape(hit.findtext("Hit_def", ""))}</h4>'
                             f'<p>Length: {escape(hit.findtext("Hit_len", ""))}</p>')
                for hsp in hit.findall("Hit_hsps/Hsp"):
                    parts.append(f'<pre class="alignment">{escape(self.hsp_text(hsp, q_step, s_step))}</pre>')
                parts.append("</div>")
            parts.append("</div>")
        return self.page("BLAST results", "\n".join(parts))

    @staticmethod
    def hit_id(hit: ET.Element) -> str:
        """The id as the FASTA file had it (BLAST writes "BX417123.1" as "emb|BX417123.1|")."""
        hit_id = hit.findtext("Hit_id", "")
        if hit_id.startswith("gnl|BL_ORD_ID"):
            return hit.findtext("Hit_accession", "")
        plain = re.fullmatch(r"(?:gb|emb|dbj|ref)\|([^|]+)\|", hit_id)
        return plain.group(1) if plain else hit_id

    @staticmethod
    def hsp_text(hsp: ET.Element, q_step: int, s_step: int) -> str:
        def num(tag: str) -> int:
            return int(hsp.findtext(tag, "0"))

        length = num("Hsp_align-len")
        stats = (f"Score: {float(hsp.findtext('Hsp_bit-score', '0')):.1f} bits ({num('Hsp_score')}), "
                 f"E value: {float(hsp.findtext('Hsp_evalue', '0')):.2g}\n"
                 f"Identities: {num('Hsp_identity')}/{length} ({100 * num('Hsp_identity') // max(length, 1)}%), "
                 f"Positives: {num('Hsp_positive')}/{length} ({100 * num('Hsp_positive') // max(length, 1)}%), "
                 f"Gaps: {num('Hsp_gaps')}/{length} ({100 * num('Hsp_gaps') // max(length, 1)}%)")
        q_frame, s_frame = num("Hsp_query-frame"), num("Hsp_hit-frame")
        if q_step == s_step == 1 and s_frame:
            stats += f"\nStrand: {'Plus' if q_frame >= 0 else 'Minus'}/{'Plus' if s_frame >= 0 else 'Minus'}"
        elif q_step == 3 or s_step == 3:
            stats += f"\nFrame: {q_frame:+d}" + (f"/{s_frame:+d}" if q_step == s_step == 3 else "")
        qseq, mid, hseq = (hsp.findtext(tag, "") for tag in ("Hsp_qseq", "Hsp_midline", "Hsp_hseq"))
        q_pos, q_end = num("Hsp_query-from"), num("Hsp_query-to")
        s_pos, s_end = num("Hsp_hit-from"), num("Hsp_hit-to")
        if q_frame < 0 and q_step == 3 and q_pos < q_end:
            q_pos, q_end = q_end, q_pos
        if s_frame < 0 and s_pos < s_end:
            s_pos, s_end = s_end, s_pos
        q_dir, s_dir = (1 if q_end >= q_pos else -1), (1 if s_end >= s_pos else -1)
        width = len(str(max(q_pos, q_end, s_pos, s_end)))
        lines = [stats]
        for i in range(0, len(qseq), 60):
            q, m, s = qseq[i:i + 60], mid[i:i + 60], hseq[i:i + 60]
            q_n, s_n = sum(c != "-" for c in q), sum(c != "-" for c in s)
            q_last = q_pos + q_dir * (q_n * q_step - 1) if q_n else q_pos - q_dir
            s_last = s_pos + s_dir * (s_n * s_step - 1) if s_n else s_pos - s_dir
            lines += ["", f"Query   {q_pos:>{width}}  {q}  {q_last}", f"        {'':>{width}}  {m}",
                      f"Subject {s_pos:>{width}}  {s}  {s_last}"]
            q_pos, s_pos = q_last + q_dir, s_last + s_dir
        return "\n".join(lines)


@dataclass
class Job:
    id: str
    query: str
    future: Future
    created: float = field(default_factory=time.monotonic)
    polls: int = 0


class JobQueue(Service):
    """A PHP-style job queue: the submission answers "Job ... submitted" and refreshes itself
    (``<meta http-equiv="refresh">`` with an ``&amp;`` URL) until the job is done; the finished
    page sets ``<base href>`` to the results directory and links the views with relative
    ``&amp;`` URLs. Views are made from the job's BLAST archive by ``blast_formatter``."""

    title = "BLAST job queue"
    routes = (("", "start"), ("submit", "submit"), ("status", "status"), ("results/view", "view"),
              ("style.css", "style"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self.workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="jobqueue")

    def page(self, title: str, body: str, refresh: str = "", base: str = "") -> str:
        meta = f'<meta http-equiv="refresh" content="{refresh}">\n' if refresh else ""
        meta += f'<base href="{escape(base)}">\n' if base else ""
        return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">\n{meta}<title>{escape(title)} - GenoQueue'
                '</title>\n<link rel="stylesheet" href="/jobqueue/style.css"></head>\n<body>\n'
                f'<div id="header">GenoQueue &mdash; sequence analysis jobs</div>\n<div id="content">\n'
                f"<h2>{escape(title)}</h2>\n{body}\n</div>\n</body></html>\n")

    def style(self, req: Req) -> Resp:
        return Resp("body{font-family:Georgia,serif}#header{background:#036;color:#fff;padding:8px}"
                    "fieldset{margin:8px 0}\n", content_type="text/css")

    def start(self, req: Req) -> str:
        databases = options_html([(db, DATABASES[db][1]) for db in ("nt", "est", "refseq_rna")], "nt")
        return f"""<form action="submit" method="post">
<fieldset><legend>Query</legend>
<label for="querySequence">Nucleotide sequence(s), FASTA or plain:</label><br>
<textarea id="querySequence" name="querySequence" rows="10" cols="80"></textarea>
</fieldset>
<fieldset><legend>Search settings</legend>
<label>Database <select name="database">{databases}</select></label>
<label>Algorithm <select name="task"><option value="megablast" selected>megablast (highly similar)</option>
<option value="dc-megablast">discontiguous megablast</option><option value="blastn">blastn (somewhat similar)</option>
</select></label>
<label>Notify me at <input type="email" name="notify" placeholder="you@example.org"></label>
</fieldset>
<input type="submit" value="Submit job">
</form>
<p>Jobs are kept for 7 days.</p>"""

    def submit(self, req: Req) -> Resp:
        methods(req, "POST")
        database, task = req.get("database", "nt"), req.get("task", "megablast")
        if database not in ("nt", "est", "refseq_rna"):
            raise Problem(200, "Unknown database.")
        if task not in ("megablast", "dc-megablast", "blastn"):
            raise Problem(200, "Unknown algorithm.")
        queries, _ = read_queries(req.get("querySequence"))
        if any(q.kind != "nucl" for q in queries):
            raise Problem(200, "This queue runs nucleotide searches only: the query is not a DNA sequence.")
        check_alphabet(queries, "nucl")
        job_id = secrets.token_hex(3)
        future = self.workers.submit(self.engine.archive, "blastn", to_fasta(queries), [database], ["-task", task])
        self.keep(self.jobs, job_id, Job(job_id, queries[0].title or "Query_1", future))
        status = f"status?job={job_id}&amp;view=1"
        return Resp(self.page(f"Job {job_id} submitted",
                              f"<p>Job <b>{job_id}</b> submitted. This page will refresh until your job is done."
                              f'</p>\n<p>Status: queued. <a href="{status}">Refresh now</a></p>',
                              refresh=f"1;url={status}"))

    def status(self, req: Req) -> Resp:
        methods(req, "GET")
        job = self.jobs.get(req.get("job"))
        if job is None:
            raise Problem(404, "No such job.")
        job.polls += 1
        if not job.future.done() or job.polls < 2 or time.monotonic() - job.created < 1.0:
            state = "queued" if job.polls < 2 else "running"
            status = f"status?job={job.id}&amp;view=1"
            return Resp(self.page(f"Job {job.id} {state}",
                                  f"<p>Job <b>{job.id}</b> is {state}. This page refreshes every second.</p>",
                                  refresh=f"1;url={status}"))
        if job.future.exception() is not None:
            raise Problem(200, f"Job {job.id} failed: {job.future.exception()}")
        base = f"http://{req.host}{req.prefix}results/"
        body = (f"<p>Job <b>{job.id}</b> ({escape(job.query)}) has finished.</p>\n<ul>\n"
                f'<li><a href="view?format=html&amp;job={job.id}">View report</a></li>\n'
                f'<li><a href="view?format=text&amp;job={job.id}">Plain text report</a></li>\n'
                f'<li><a href="view?format=tabular&amp;job={job.id}">Hit table</a></li>\n</ul>')
        return Resp(self.page(f"Job {job.id} done", body, base=base))

    def view(self, req: Req) -> Resp:
        methods(req, "GET")
        job = self.jobs.get(req.get("job"))
        if job is None or not job.future.done() or job.future.exception() is not None:
            raise Problem(404, "No such job.")
        view = req.get("format", "html")
        if view == "text":
            return Resp(self.engine.format(job.future.result()), content_type="text/plain; charset=utf-8")
        if view == "tabular":
            return Resp(self.engine.format(job.future.result(), outfmt="7"), content_type="text/plain; charset=utf-8")
        if view != "html":
            raise Problem(400, f"Unknown format: {view}")
        return Resp(self.engine.format(job.future.result(), html=True))


class SeeOther(Service):
    """A Flask app: the form POSTs, the answer is 303 See Other to the result page, which
    shows the BLAST+ ``-html`` report inside the site's layout."""

    title = "NucBLAST"
    routes = (("", "start"), ("search", "search"), (r"results/([0-9a-f]{32})", "results"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.reports: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def page(self, title: str, body: str) -> str:
        return modern_page("GenomeHub", title, body, (("/redirect303/", "BLAST"), ("/literature/", "Literature")))

    def error(self, problem: Problem) -> Resp:
        if problem.status == 405:
            return Resp(self.page("405 Method Not Allowed",
                                  "<p>The method is not allowed for the requested URL.</p>"), 405,
                        headers=[("Allow", "POST, OPTIONS")])
        return super().error(problem)

    def start(self, req: Req) -> str:
        databases = options_html([(db, DATABASES[db][1]) for db in ("nt", "refseq_rna", "est", "rrna")], "nt")
        return f"""<form method="POST" action="/redirect303/search">
<div class="mb-3"><label for="seq" class="form-label">Query sequence</label>
<textarea class="form-control" id="seq" name="seq" rows="8" required></textarea></div>
<div class="mb-3"><label for="db" class="form-label">Database</label>
<select class="form-select" id="db" name="db">{databases}</select></div>
<input type="hidden" name="program" value="blastn">
<div class="mb-3"><label for="email" class="form-label">Email (optional)</label>
<input type="email" class="form-control" id="email" name="email"></div>
<button type="submit" class="btn btn-primary">Search</button>
</form>"""

    def search(self, req: Req) -> Resp:
        methods(req, "POST")
        db = req.get("db")
        if db not in ("nt", "refseq_rna", "est", "rrna"):
            raise Problem(400, "Bad Request: unknown database.")
        try:
            queries, _ = read_queries(req.get("seq"))
            if any(q.kind != "nucl" for q in queries):
                raise Problem(400, "NucBLAST searches nucleotide sequences; your query looks like a protein.")
            check_alphabet(queries, "nucl")
        except Problem as problem:
            return Resp(self.page("NucBLAST", f'<div class="alert alert-danger">{escape(problem.message)}</div>'
                                              '<p><a href="/redirect303/">Back</a></p>'), 400)
        report = self.engine.run("blastn", to_fasta(queries), [db], html=True, options=["-task", "megablast"])
        key = secrets.token_hex(16)
        self.keep(self.reports, key, (queries[0].title or "Query_1", report))
        return redirect(f"/redirect303/results/{key}", 303, "<p>Redirecting to your results.</p>")

    def results(self, req: Req, key: str) -> str:
        methods(req, "GET")
        found = self.reports.get(key)
        if found is None:
            raise Problem(404, "Not Found: these results have expired.")
        return self.page(f"Results for {found[0]}", html_report_body(found[1]))


class IframeReport(Service):
    """An old GET form; the result page frames a text/plain report in an ``<iframe>``."""

    title = "Genome BLAST"
    routes = (("", "start"), ("run.php", "run"), (r"out/([0-9a-f]{12})\.txt", "report"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.reports: OrderedDict[str, str] = OrderedDict()

    def page(self, title: str, body: str) -> str:
        return (f'<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">\n<html><head><title>'
                f'{escape(title)}</title></head>\n<body style="font-family:Verdana,sans-serif">\n'
                f'<div style="background:#060;color:#fff;padding:6px">Rice Genome Annotation Resource</div>\n'
                f"<h3>{escape(title)}</h3>\n{body}\n</body></html>\n")

    def start(self, req: Req) -> str:
        dbs = options_html((("nt", "All sequences (genome + transcripts)"), ("est", "ESTs"),
                            ("refseq_rna", "Annotated transcripts")), "nt")
        return f"""<form name="blast" action="run.php" method="get">
<table>
<tr><td valign="top">Sequence:</td><td><textarea name="seqtext" rows="8" cols="70"></textarea></td></tr>
<tr><td>Search set:</td><td><select name="dataset">{dbs}</select></td></tr>
<tr><td>Program:</td><td><select name="prog"><option value="blastn" selected>blastn</option>
<option value="tblastx">tblastx</option></select></td></tr>
<tr><td>E-value cutoff:</td><td><input type="text" name="evalue" value="1e-5" size="8"></td></tr>
<tr><td></td><td><input type="submit" value="BLAST"></td></tr>
</table>
</form>"""

    def run(self, req: Req) -> str:
        methods(req, "GET")
        dataset, prog = req.get("dataset", "nt"), req.get("prog", "blastn")
        if dataset not in ("nt", "est", "refseq_rna") or prog not in ("blastn", "tblastx"):
            raise Problem(200, "Invalid search set or program.")
        try:
            evalue = float(req.get("evalue", "1e-5"))
        except ValueError:
            raise Problem(200, "E-value cutoff must be a number, e.g. 1e-5.") from None
        queries, _ = read_queries(req.get("seqtext"))
        if any(q.kind != "nucl" for q in queries):
            raise Problem(200, "Please enter a nucleotide sequence.")
        check_alphabet(queries, "nucl")
        options = ["-evalue", str(evalue)] + (["-task", "blastn"] if prog == "blastn" else [])
        report = self.engine.run(prog, to_fasta(queries), [dataset], options=options)
        key = secrets.token_hex(6)
        self.keep(self.reports, key, report)
        return self.page("BLAST results", f'<p><a href="./">New search</a></p>\n<iframe src="out/{key}.txt" '
                                          'width="100%" height="600" frameborder="0"></iframe>')

    def report(self, req: Req, key: str) -> Resp:
        methods(req, "GET")
        report = self.reports.get(key)
        if report is None:
            raise Problem(404, "Not Found")
        return Resp(report, content_type="text/plain; charset=utf-8")


class DownloadOnly(Service):
    """A Django app with CSRF protection; the result page only offers the report as a
    download."""

    title = "BLAST"
    routes = (("", "start"), ("submit/", "submit"), (r"report/([0-9a-f]{16})\.txt", "report"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.reports: OrderedDict[str, str] = OrderedDict()

    def page(self, title: str, body: str) -> str:
        return modern_page("PlantSeq Portal", title, body, (("/download/", "BLAST"), ("/site-search/", "Search")))

    def start(self, req: Req) -> Resp:
        methods(req, "GET")
        token = req.cookies.get("csrftoken") or secrets.token_hex(16)
        dbs = options_html([(db, DATABASES[db][1]) for db in ("nt", "est", "refseq_rna")], "nt")
        body = f"""<form action="submit/" method="post">
<input type="hidden" name="csrfmiddlewaretoken" value="{token}">
<p><label for="id_query_sequence">Query sequence:</label><br>
<textarea name="query_sequence" cols="80" rows="10" id="id_query_sequence" required></textarea></p>
<p><label for="id_database">Database:</label> <select name="database" id="id_database">{dbs}</select></p>
<p><label for="id_expect">Expect threshold:</label>
<input type="text" name="expect" value="0.001" id="id_expect"></p>
<p><input type="submit" value="Run BLAST"></p>
</form>"""
        return Resp(self.page("Nucleotide BLAST", body),
                    headers=[("Set-Cookie", f"csrftoken={token}; Path=/download/; SameSite=Lax")])

    def submit(self, req: Req) -> Resp | str:
        methods(req, "POST")
        token = req.cookies.get("csrftoken", "")
        if not token or token != req.get("csrfmiddlewaretoken"):
            reason = "CSRF cookie not set." if not token else "CSRF token incorrect."
            return Resp('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>403 Forbidden</title>'
                        '</head><body><div id="summary"><h1>Forbidden <span>(403)</span></h1>'
                        f"<p>CSRF verification failed. Request aborted.</p><p>Reason given for failure:</p>"
                        f"<pre>    {reason}</pre></div></body></html>", 403)
        errors = []
        database = req.get("database")
        if database not in ("nt", "est", "refseq_rna"):
            errors.append("Select a valid choice. That choice is not one of the available choices.")
        try:
            expect = float(req.get("expect", "0.001"))
        except ValueError:
            errors.append("Expect threshold: enter a number.")
        queries: list[Query] = []
        try:
            queries, _ = read_queries(req.get("query_sequence"))
            if any(q.kind != "nucl" for q in queries):
                raise Problem(200, "Enter a nucleotide sequence.")
            check_alphabet(queries, "nucl")
        except Problem as problem:
            errors.append(problem.message)
        if errors:
            items = "".join(f"<li>{escape(e)}</li>" for e in errors)
            return self.page("Nucleotide BLAST", f'<ul class="errorlist">{items}</ul><p><a href="/download/">Back'
                                                 "</a></p>")
        report = self.engine.run("blastn", to_fasta(queries), [database],
                                 options=["-evalue", str(expect), "-task", "megablast"])
        key = secrets.token_hex(8)
        self.keep(self.reports, key, report)
        return self.page("Search finished", f"<p>Your search has finished.</p>\n<p><a class=\"btn btn-success\" "
                                            f'href="/download/report/{key}.txt" download>Download the report (text)'
                                            "</a></p>")

    def report(self, req: Req, key: str) -> Resp:
        methods(req, "GET")
        report = self.reports.get(key)
        if report is None:
            raise Problem(404, "Page not found")
        return Resp(report, content_type="text/plain; charset=utf-8",
                    headers=[("Content-Disposition", f'attachment; filename="blast-{key}.txt"')])


class FastaRequired(Service):
    """A genome project's BLAST page that only reads FASTA."""

    title = "BLAST the genome"
    routes = (("", "start"), ("blast.php", "blast"))

    def page(self, title: str, body: str) -> str:
        return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(title)} :: ZFIN-like Genome '
                'Project</title></head>\n<body>\n<div class="masthead"><a href="/">Zebrafish Genome Project</a> '
                f'| <a href="/site-search/">Search</a></div>\n<h2>{escape(title)}</h2>\n{body}\n'
                '<p class="footer">Genome assembly GRCz11 (local copy)</p></body></html>\n')

    def start(self, req: Req) -> str:
        return """<form method="post" action="blast.php">
<p>Paste one or more sequences in FASTA format:</p>
<textarea name="fasta" rows="10" cols="80" placeholder=">my_sequence&#10;ACGT..."></textarea>
<p>Search against:
<input type="radio" name="dbname" value="nt" id="db-nt" checked>
<label for="db-nt">Genome contigs and transcripts</label>
<input type="radio" name="dbname" value="est" id="db-est"><label for="db-est">ESTs</label></p>
<p>Program: <select name="program"><option value="blastn">BLASTN</option><option value="tblastx">TBLASTX</option>
</select> Max. target sequences: <select name="max_target_seqs"><option>10</option><option selected>50</option>
<option>100</option></select></p>
<p><input type="submit" name="submit" value="BLAST!"></p>
</form>"""

    def blast(self, req: Req) -> str:
        methods(req, "POST")
        text = req.get("fasta").strip()
        if not text:
            raise Problem(200, "Error: no sequence entered.")
        if not text.startswith(">"):
            raise Problem(200, "Error: input must be in FASTA format (start with >)")
        queries, _ = read_queries(text)
        if any(q.kind != "nucl" for q in queries):
            raise Problem(200, "Error: only nucleotide sequences can be searched here.")
        check_alphabet(queries, "nucl")
        dbname, program = req.get("dbname", "nt"), req.get("program", "blastn")
        if dbname not in ("nt", "est") or program not in ("blastn", "tblastx"):
            raise Problem(200, "Error: invalid database or program.")
        limit = req.get("max_target_seqs", "50")
        options = ["-max_target_seqs", limit if limit.isdigit() else "50"]
        report = self.engine.run(program, to_fasta(queries), [dbname], html=True, options=options)
        return self.page("BLAST results", html_report_body(report))


class UploadOnly(Service):
    """A file upload is the only way in: no textarea."""

    title = "Upload a FASTA file"
    routes = (("", "start"), ("upload", "upload"))

    def page(self, title: str, body: str) -> str:
        return classic_page("Marine Microbial Genomics Lab", title, body, "Lab web server &middot; Apache/2.2.3")

    def start(self, req: Req) -> str:
        dbs = options_html((("nt", "All nucleotide sequences"), ("rrna", "16S rRNA genes")), "nt")
        return f"""<P>Upload a file with your nucleotide sequence(s) in FASTA format (at most 1 MB).</P>
<FORM METHOD="POST" ACTION="upload" ENCTYPE="multipart/form-data">
<P>FASTA file: <INPUT TYPE="file" NAME="seqfile" ACCEPT=".fa,.fasta,.fna,.txt"></P>
<P>Database: <SELECT NAME="db">{dbs}</SELECT></P>
<P><INPUT TYPE="submit" VALUE="Upload and BLAST"></P>
</FORM>"""

    def upload(self, req: Req) -> str:
        methods(req, "POST")
        if not req.multipart:
            raise Problem(400, "Bad request: the file must be sent as multipart/form-data.")
        text = req.get("seqfile")
        if not text.strip():
            raise Problem(200, "Please choose a FASTA file to upload.")
        if len(text) > 1024 * 1024:
            raise Problem(200, "The file is larger than 1 MB.")
        queries, _ = read_queries(text)
        if any(q.kind != "nucl" for q in queries):
            raise Problem(200, "The file does not contain nucleotide sequences.")
        check_alphabet(queries, "nucl")
        db = req.get("db", "nt")
        if db not in ("nt", "rrna"):
            raise Problem(200, "Unknown database.")
        report = self.engine.run("blastn", to_fasta(queries), [db], options=["-task", "blastn"])
        return f"<P><A HREF=\"./\">Upload another file</A></P>\n{pre(report)}"


class Wizard(Service):
    """Two steps: choose the program, then enter the sequence on a form made for it."""

    title = "BLAST wizard"
    routes = (("", "start"), ("step2", "step2"), ("run", "run"))
    programs = (("blastn", "BLASTN: nucleotide query, nucleotide database"),
                ("blastp", "BLASTP: protein query, protein database"),
                ("blastx", "BLASTX: translated nucleotide query, protein database"),
                ("tblastn", "TBLASTN: protein query, translated nucleotide database"))

    def page(self, title: str, body: str) -> str:
        return modern_page("Institute BLAST", title, body, (("/wizard/", "Start over"),))

    def start(self, req: Req, error: str = "") -> str:
        methods(req, "GET")
        radios = "".join(f'<div><input type="radio" name="program" id="{p}" value="{p}"><label for="{p}">'
                         f"{escape(label)}</label></div>" for p, label in self.programs)
        alert = f'<div class="alert alert-danger">{escape(error)}</div>' if error else ""
        return self.page("Step 1 of 2: choose a program", f"""{alert}<form action="step2" method="get">
{radios}
<button type="submit">Next &raquo;</button>
</form>""")

    def step2(self, req: Req) -> str:
        methods(req, "GET")
        program = req.get("program")
        if program not in dict(self.programs):
            return self.start(req, "Please choose a BLAST program.")
        want_query, want_db = PROGRAMS[program]
        names = NUCLEOTIDE_DBS if want_db == "nucl" else PROTEIN_DBS
        dbs = options_html([(db, DATABASES[db][1]) for db in names if db != "mito"])
        kind = "nucleotide" if want_query == "nucl" else "protein"
        return self.page(f"Step 2 of 2: {program.upper()}", f"""<form action="run" method="post">
<input type="hidden" name="program" value="{program}">
<p><label for="querySeq">Your {kind} sequence (FASTA or plain text):</label><br>
<textarea id="querySeq" name="querySeq" rows="8" cols="80"></textarea></p>
<p><label for="database">Database:</label> <select id="database" name="database">{dbs}</select></p>
<p><label for="email">E-mail (optional):</label> <input type="text" id="email" name="email"></p>
<p><a href="/wizard/">&laquo; Back</a> <button type="submit">Run {program.upper()}</button></p>
</form>""")

    def run(self, req: Req) -> str:
        methods(req, "POST")
        program, database = req.get("program"), req.get("database")
        if program not in dict(self.programs):
            raise Problem(200, "Your session has expired: please start again from step 1.")
        want_query, want_db = PROGRAMS[program]
        if DATABASES.get(database, ("",))[0] != want_db:
            raise Problem(200, f"{database or 'No database'} cannot be searched with {program.upper()}.")
        queries, _ = read_queries(req.get("querySeq"))
        if any(q.kind != want_query for q in queries):
            raise Problem(200, f"{program.upper()} needs a {'nucleotide' if want_query == 'nucl' else 'protein'} "
                               "query sequence.")
        check_alphabet(queries, want_query)
        email = req.get("email").strip()
        if email and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}", email):
            raise Problem(200, "The e-mail address is not valid.")
        options = ["-task", "blastn"] if program == "blastn" else []
        report = self.engine.run(program, to_fasta(queries), [database], html=True, options=options)
        return self.page(f"{program.upper()} results", html_report_body(report))


class JobTitle(Service):
    """An NCBI-like multipart form whose job title is required."""

    title = "Standard Nucleotide BLAST"
    routes = (("", "start"), ("Blast.cgi", "run"))
    tasks = (("megaBlast", "megablast", "Highly similar sequences (megablast)"),
             ("discoMegablast", "dc-megablast", "More dissimilar sequences (discontiguous megablast)"),
             ("blastn", "blastn", "Somewhat similar sequences (blastn)"))

    def page(self, title: str, body: str) -> str:
        return modern_page("BLAST\u00ae mirror", title, body, (("/jobtitle/", "Home"), ("/tutorial/", "Help")))

    def start(self, req: Req, error: str = "", values: dict[str, str] | None = None) -> str:
        values = values or {}
        radios = "".join(f'<input type="radio" name="BLAST_PROGRAMS" id="{k}" value="{k}"'
                         f'{" checked" if values.get("BLAST_PROGRAMS", "megaBlast") == k else ""}>'
                         f'<label for="{k}">{escape(label)}</label><br>' for k, _, label in self.tasks)
        dbs = options_html([(db, DATABASES[db][1]) for db in ("nt", "refseq_rna", "est")],
                           values.get("DATABASE", "nt"))
        alert = f'<div class="alert alert-danger" role="alert">{escape(error)}</div>' if error else ""
        return self.page(self.title, f"""{alert}<form action="Blast.cgi" method="post" enctype="multipart/form-data"
 name="searchForm">
<fieldset><legend>Enter Query Sequence</legend>
<label for="seq">Enter accession number(s), gi(s), or FASTA sequence(s)</label><br>
<textarea name="QUERY" id="seq" rows="6" cols="80">{escape(values.get("QUERY", ""))}</textarea><br>
<label for="qfrom">Query subrange From</label> <input name="QUERY_FROM" id="qfrom" size="8">
<label for="qto">To</label> <input name="QUERY_TO" id="qto" size="8"><br>
<label for="upl">Or, upload file</label> <input type="file" name="QUERYFILE" id="upl"><br>
<label for="title">Job Title</label> <input name="JOB_TITLE" id="title" size="40"
 value="{escape(values.get("JOB_TITLE", ""))}" placeholder="Enter a descriptive title for your BLAST search">
</fieldset>
<fieldset><legend>Choose Search Set</legend>
<label for="db">Database</label> <select name="DATABASE" id="db">{dbs}</select>
</fieldset>
<fieldset><legend>Program Selection</legend>{radios}</fieldset>
<input type="submit" value="BLAST" class="blastbutton">
<input type="checkbox" name="NEWWIN" id="nw"><label for="nw">Show results in a new window</label>
</form>""")

    def run(self, req: Req) -> str:
        methods(req, "POST")
        values = {k: req.get(k) for k in ("QUERY", "JOB_TITLE", "DATABASE", "BLAST_PROGRAMS")}
        text = req.get("QUERY") if req.get("QUERY").strip() else req.get("QUERYFILE")
        if not text.strip():
            return self.start(req, "Please enter a query sequence.", values)
        title = req.get("JOB_TITLE").strip()
        if not title:
            return self.start(req, "Please fill in the job title.", values)
        task = {k: t for k, t, _ in self.tasks}.get(req.get("BLAST_PROGRAMS", "megaBlast"))
        database = req.get("DATABASE")
        if task is None or database not in ("nt", "refseq_rna", "est"):
            return self.start(req, "Unknown program or database.", values)
        try:
            queries, _ = read_queries(text)
            if any(q.kind != "nucl" for q in queries):
                raise Problem(200, "Nucleotide BLAST needs a nucleotide query; use protein BLAST for proteins.")
            check_alphabet(queries, "nucl")
        except Problem as problem:
            return self.start(req, problem.message, values)
        options = ["-task", task]
        start, end = req.get("QUERY_FROM").strip(), req.get("QUERY_TO").strip()
        if start or end:
            if not (start.isdigit() and end.isdigit() and 0 < int(start) < int(end)):
                return self.start(req, "Query subrange: From and To must be positions, From below To.", values)
            options += ["-query_loc", f"{start}-{end}"]
        report = self.engine.run("blastn", to_fasta(queries), [database], options=options)
        return self.page(f"Job title: {title}", f"<p>Program: BLASTN ({escape(task)}) &middot; Database: "
                                                f"{escape(DATABASES[database][1])}</p>\n{pre(report)}")


class Tabular(Service):
    """A modern tool that shows a hit table from ``-outfmt 7`` and no alignments."""

    title = "Quick BLAST"
    routes = (("", "start"), ("search", "search"))
    columns = ("Query", "Subject", "% identity", "Alignment length", "Mismatches", "Gap opens", "Q. start",
               "Q. end", "S. start", "S. end", "E-value", "Bit score")

    def page(self, title: str, body: str) -> str:
        return modern_page("SeqTools", title, body, (("/tabular/", "Quick BLAST"), ("/revcomp/", "Reverse complement"),
                                                     ("/primer/", "Primer design")))

    def start(self, req: Req) -> str:
        dbs = options_html([(db, DATABASES[db][1]) for db in ("nt", "est", "refseq_rna", "rrna")], "nt")
        hits = options_html([(n, n) for n in ("10", "50", "250")], "50")
        return f"""<form action="search" method="get" class="row g-3">
<div class="col-12"><label for="input" class="form-label">DNA sequence</label>
<textarea class="form-control font-monospace" id="input" name="input" rows="6"></textarea></div>
<div class="col-md-4"><label for="db" class="form-label">Database</label><select id="db" name="db" class="form-select">
{dbs}</select></div>
<div class="col-md-4"><label for="evalue" class="form-label">E-value</label>
<input id="evalue" name="evalue" class="form-control" value="1e-10"></div>
<div class="col-md-4"><label for="max" class="form-label">Max hits</label><select id="max" name="max"
 class="form-select">{hits}</select></div>
<div class="col-12"><button type="submit" class="btn btn-primary">Search</button></div>
</form>"""

    def search(self, req: Req) -> str:
        methods(req, "GET")
        db = req.get("db", "nt")
        if db not in ("nt", "est", "refseq_rna", "rrna"):
            raise Problem(400, "Unknown database.")
        try:
            evalue = float(req.get("evalue", "1e-10"))
        except ValueError:
            raise Problem(400, "E-value must be a number.") from None
        limit = req.get("max", "50")
        queries, _ = read_queries(req.get("input"))
        if any(q.kind != "nucl" for q in queries):
            raise Problem(400, "Only DNA sequences are accepted.")
        check_alphabet(queries, "nucl")
        options = ["-evalue", str(evalue), "-max_target_seqs", limit if limit.isdigit() else "50"]
        table = self.engine.run("blastn", to_fasta(queries), [db], outfmt="7", options=options)
        rows = [line.split("\t") for line in table.splitlines() if line and not line.startswith("#")]
        found = re.findall(r"^# (\d+) hits found", table, re.M)
        total = sum(int(n) for n in found)
        summary = (f"<p>{total} hit{'' if total == 1 else 's'} for {len(queries)} quer"
                   f"{'y' if len(queries) == 1 else 'ies'} against {escape(DATABASES[db][1])}.</p>")
        if not rows:
            return self.page("Results", summary + '<p class="text-muted">No hits found.</p>')
        head = "".join(f"<th>{escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>\n" for row in rows)
        return self.page("Results", f'{summary}<table class="table table-sm"><thead><tr>{head}</tr></thead>'
                                    f"<tbody>\n{body}</tbody></table>")


class NoHits(Service):
    """Organelle genomes only, with a strict E-value: most sequences find nothing."""

    title = "MitoBLAST"
    routes = (("", "start"), ("search", "search"))

    def page(self, title: str, body: str) -> str:
        return classic_page("Organelle Genome Database", title, body, "OGDB release 12 &middot; curated mtDNA")

    def start(self, req: Req) -> str:
        expects = options_html([(e, e) for e in ("1e-20", "1e-10", "0.001", "1", "10")], "0.001")
        return f"""<P>Search our mitochondrial genomes with a nucleotide sequence.</P>
<FORM ACTION="search" METHOD="POST">
<TEXTAREA NAME="sequence_data" ROWS=8 COLS=70></TEXTAREA><BR>
Genomes: <SELECT NAME="organelle"><OPTION VALUE="mito" SELECTED>Mitochondria (2 genomes)</OPTION></SELECT>
Expect: <SELECT NAME="expect">{expects}</SELECT>
<INPUT TYPE="submit" VALUE="Search">
</FORM>"""

    def search(self, req: Req) -> str:
        methods(req, "POST")
        if req.get("organelle", "mito") != "mito":
            raise Problem(200, "Unknown genome set.")
        try:
            expect = float(req.get("expect", "0.001"))
        except ValueError:
            raise Problem(200, "Expect must be a number.") from None
        queries, _ = read_queries(req.get("sequence_data"))
        if any(q.kind != "nucl" for q in queries):
            raise Problem(200, "Please enter a DNA sequence.")
        check_alphabet(queries, "nucl")
        report = self.engine.run("blastn", to_fasta(queries), ["mito"],
                                 options=["-task", "blastn", "-evalue", str(expect)])
        return f'<P><A HREF="./">New search</A></P>\n{pre(report)}'


# ---------------------------------------------------------------------------------------------
# Non-members and look-alikes
# ---------------------------------------------------------------------------------------------


class BlastpOnly(Service):
    """A protein BLAST server (BLASTP only): member of protein BLAST, refuses DNA."""

    title = "ProtBLAST"
    routes = (("", "start"), ("blastp.cgi", "run"))

    def page(self, title: str, body: str) -> str:
        return classic_page("Structural Biology Unit", title, body, "ProtBLAST 3.1 &middot; BLASTP only")

    def start(self, req: Req) -> str:
        dbs = options_html([(db, DATABASES[db][1]) for db in PROTEIN_DBS], "swissprot")
        matrices = options_html([(m, m) for m in ("BLOSUM62", "BLOSUM80", "BLOSUM45", "PAM30", "PAM70")], "BLOSUM62")
        return f"""<P>Compare a <B>protein</B> sequence with protein databases (BLASTP).</P>
<FORM ACTION="blastp.cgi" METHOD="POST">
<P>Protein sequence (one-letter codes, FASTA allowed):<BR><TEXTAREA NAME="protein_seq" ROWS=8 COLS=70></TEXTAREA></P>
<P>Database: <SELECT NAME="database">{dbs}</SELECT> Matrix: <SELECT NAME="matrix">{matrices}</SELECT></P>
<P><INPUT TYPE="submit" VALUE="Run BLASTP"></P>
</FORM>"""

    def run(self, req: Req) -> str:
        methods(req, "POST")
        database, matrix = req.get("database", "swissprot"), req.get("matrix", "BLOSUM62")
        if database not in PROTEIN_DBS or matrix not in ("BLOSUM62", "BLOSUM80", "BLOSUM45", "PAM30", "PAM70"):
            raise Problem(200, "Unknown database or matrix.")
        queries, _ = read_queries(req.get("protein_seq"))
        if any(q.kind == "nucl" for q in queries):
            raise Problem(200, "Error: your query looks like a nucleotide sequence (A, C, G, T only). ProtBLAST "
                               "compares protein sequences; translate it first, or use BLASTX.")
        check_alphabet(queries, "prot")
        report = self.engine.run("blastp", to_fasta(queries), [database], options=["-matrix", matrix])
        return f'<P><A HREF="./">New search</A></P>\n{pre(report)}'


class Blastx(Service):
    """BLASTX: a DNA query translated in six frames against proteins; the report aligns
    proteins."""

    title = "BLASTX: translated search"
    routes = (("", "start"), ("run", "run"))
    codes = (("1", "Standard (1)"), ("2", "Vertebrate Mitochondrial (2)"), ("11", "Bacteria and Archaea (11)"))

    def page(self, title: str, body: str) -> str:
        return modern_page("ProteomeDB", title, body, (("/blastx/", "BLASTX"), ("/blastp-only/", "BLASTP")))

    def start(self, req: Req) -> str:
        dbs = options_html([(db, DATABASES[db][1]) for db in PROTEIN_DBS], "swissprot")
        return f"""<p>Find proteins similar to the translations of a nucleotide sequence.</p>
<form action="run" method="post">
<p><label for="nq">Nucleotide query</label><br>
<textarea id="nq" name="nucleotide_query" rows="8" cols="80"></textarea></p>
<p><label for="db">Protein database</label> <select id="db" name="db">{dbs}</select>
<label for="gc">Genetic code</label> <select id="gc" name="genetic_code">{options_html(self.codes, "1")}</select></p>
<p><button type="submit">Run BLASTX</button></p>
</form>"""

    def run(self, req: Req) -> str:
        methods(req, "POST")
        db, code = req.get("db", "swissprot"), req.get("genetic_code", "1")
        if db not in PROTEIN_DBS or code not in dict(self.codes):
            raise Problem(400, "Unknown database or genetic code.")
        queries, _ = read_queries(req.get("nucleotide_query"))
        if any(q.kind != "nucl" for q in queries):
            raise Problem(400, "BLASTX needs a nucleotide query; for a protein query use BLASTP.")
        check_alphabet(queries, "nucl")
        report = self.engine.run("blastx", to_fasta(queries), [db], html=True, options=["-query_gencode", code])
        return self.page("BLASTX results", html_report_body(report))


class ReverseComplement(Service):
    """Sequence Manipulation Suite style: echoes the sequence transformed, numbered, in ``<pre>``."""

    title = "Reverse Complement"
    routes = (("", "start"), ("convert", "convert"))
    actions = (("revcomp", "reverse complement"), ("reverse", "reverse"), ("complement", "complement"))

    def page(self, title: str, body: str) -> str:
        return modern_page("SeqTools", title, body, (("/tabular/", "Quick BLAST"), ("/revcomp/", "Reverse complement"),
                                                     ("/primer/", "Primer design")), blast=False)

    def start(self, req: Req) -> str:
        return f"""<p>Reverse Complement converts a DNA sequence into its reverse, complement, or reverse-complement
counterpart. Paste a raw sequence or one or more FASTA sequences.</p>
<form action="convert" method="post">
<textarea name="seq" rows="8" cols="80"></textarea><br>
<select name="action">{options_html(self.actions, "revcomp")}</select>
<input type="checkbox" name="numbered" value="1" checked> number the lines
<button type="submit">Submit</button> <button type="reset">Clear</button>
</form>"""

    def convert(self, req: Req) -> str:
        methods(req, "POST")
        action = req.get("action", "revcomp")
        if action not in dict(self.actions):
            raise Problem(400, "Unknown action.")
        queries, _ = read_queries(req.get("seq"))
        check_alphabet(queries, "nucl")
        out = []
        for n, q in enumerate(queries, 1):
            letters = q.letters.replace("U", "T")
            done = {"revcomp": reverse_complement(letters), "reverse": letters[::-1],
                    "complement": reverse_complement(letters)[::-1]}[action]
            out.append(f">{dict(self.actions)[action]} of {q.title or f'sequence {n}'} ({len(done)} bp)")
            if req.get("numbered"):
                width = len(str(len(done)))
                out += [f"{a:>{width}}  {chunk}  {b}" for a, chunk, b in number_lines(done)]
            else:
                out += [done[i:i + 60] for i in range(0, len(done), 60)]
            out.append("")
        return self.page("Reverse Complement results", pre("\n".join(out)) + '<p><a href="./">Again</a></p>')


class PrimerDesign(Service):
    """Primer3-like: picks a primer pair and prints the template numbered with the primers
    marked, as Primer3's text output does."""

    title = "Primer design"
    routes = (("", "start"), ("pick", "pick"))

    def page(self, title: str, body: str) -> str:
        return modern_page("SeqTools", title, body, (("/tabular/", "Quick BLAST"), ("/revcomp/", "Reverse complement"),
                                                     ("/primer/", "Primer design")), blast=False)

    def start(self, req: Req) -> str:
        return """<form action="pick" method="post">
<p>Sequence id: <input name="SEQUENCE_ID" size="20"></p>
<p>Paste source sequence below (5'-&gt;3', string of ACGTNacgtn -- other letters treated as N -- numbers and
blanks ignored). FASTA format ok.</p>
<textarea name="SEQUENCE_TEMPLATE" rows="8" cols="90"></textarea>
<table>
<tr><td>Product Size Ranges</td><td><input name="PRIMER_PRODUCT_SIZE_RANGE" value="100-300" size="20"></td></tr>
<tr><td>Primer Size</td><td>Min <input name="PRIMER_MIN_SIZE" value="18" size="3"> Opt
<input name="PRIMER_OPT_SIZE" value="20" size="3"> Max <input name="PRIMER_MAX_SIZE" value="23" size="3"></td></tr>
<tr><td>Primer Tm</td><td>Min <input name="PRIMER_MIN_TM" value="57.0" size="5"> Opt
<input name="PRIMER_OPT_TM" value="60.0" size="5"> Max <input name="PRIMER_MAX_TM" value="63.0" size="5"></td></tr>
</table>
<input type="submit" name="Pick Primers" value="Pick Primers"> <input type="reset" value="Reset Form">
</form>"""

    # SantaLucia (1998) nearest-neighbour parameters: dH (kcal/mol), dS (cal/K/mol)
    NN = {"AA": (-7.9, -22.2), "TT": (-7.9, -22.2), "AT": (-7.2, -20.4), "TA": (-7.2, -21.3),
          "CA": (-8.5, -22.7), "TG": (-8.5, -22.7), "GT": (-8.4, -22.4), "AC": (-8.4, -22.4),
          "CT": (-7.8, -21.0), "AG": (-7.8, -21.0), "GA": (-8.2, -22.2), "TC": (-8.2, -22.2),
          "CG": (-10.6, -27.2), "GC": (-9.8, -24.4), "GG": (-8.0, -19.9), "CC": (-8.0, -19.9)}

    @classmethod
    def tm(cls, oligo: str, salt: float = 0.05 + 0.12 * math.sqrt(1.5 - 0.6), strands: float = 50e-9) -> float:
        """Melting temperature (C): nearest-neighbour, salt-corrected, as Primer3 computes it with its
        defaults (50 mM monovalent ions, 1.5 mM Mg2+ less 0.6 mM dNTPs as Na+ equivalents, 50 nM oligo)."""
        dh = ds = 0.0
        for end in (oligo[0], oligo[-1]):
            dh, ds = (dh + 0.1, ds - 2.8) if end in "GC" else (dh + 2.3, ds + 4.1)
        for pair in zip(oligo, oligo[1:], strict=False):
            h, s = cls.NN["".join(pair)]
            dh, ds = dh + h, ds + s
        ds += 0.368 * (len(oligo) - 1) * math.log(salt)
        return 1000 * dh / (ds + 1.987 * math.log(strands / 4)) - 273.15

    def pick(self, req: Req) -> str:
        methods(req, "POST")
        queries, _ = read_queries(req.get("SEQUENCE_TEMPLATE"))
        template = re.sub(r"[^ACGT]", "N", queries[0].letters.replace("U", "T"))
        if len(template) > 10_000:
            raise Problem(200, f"PRIMER_ERROR=Sequence too long ({len(template)} bp; at most 10000).")
        name = req.get("SEQUENCE_ID").strip() or queries[0].title or "sequence"
        try:
            low, high = (int(x) for x in req.get("PRIMER_PRODUCT_SIZE_RANGE", "100-300").split("-"))
            sizes = [int(req.get(f"PRIMER_{k}_SIZE", d)) for k, d in (("MIN", "18"), ("MAX", "23"))]
            tms = [float(req.get(f"PRIMER_{k}_TM", d)) for k, d in (("MIN", "57"), ("OPT", "60"), ("MAX", "63"))]
        except ValueError:
            raise Problem(200, "PRIMER_ERROR=Illegal value in PRIMER_PRODUCT_SIZE_RANGE, size or Tm.") from None
        if len(template) < low:
            raise Problem(200, f"PRIMER_ERROR=Sequence ({len(template)} bp) is shorter than the smallest product "
                               f"size ({low}).")
        stats = {"considered": 0, "GC content failed": 0, "low tm": 0, "high tm": 0, "ok": 0}
        sequences = (template, reverse_complement(template))
        candidates: list[list[tuple[float, int, str, float]]] = [[], []]
        for strand, seq in enumerate(sequences):
            for start in range(len(seq)):
                for size in range(sizes[0], sizes[1] + 1):
                    oligo = seq[start:start + size]
                    if len(oligo) < size or "N" in oligo:
                        continue
                    stats["considered"] += 1
                    gc = 100 * sum(c in "GC" for c in oligo) / size
                    tm = self.tm(oligo)
                    if not 20 <= gc <= 80:
                        stats["GC content failed"] += 1
                    elif tm < tms[0]:
                        stats["low tm"] += 1
                    elif tm > tms[2]:
                        stats["high tm"] += 1
                    else:
                        stats["ok"] += 1
                        candidates[strand].append((abs(tm - tms[1]), start, oligo, tm))
        left = sorted(candidates[0])[:60]
        right = sorted(candidates[1])[:60]
        best = None
        for lp, ls, lo, lt in left:
            for rp, rs, ro, rt in right:
                right_end = len(template) - rs  # 1-based position of the right primer's 5' end
                product = right_end - ls
                if low <= product <= high:
                    penalty = lp + rp + abs(lt - rt)
                    if best is None or penalty < best[0]:
                        best = (penalty, ls, lo, lt, right_end, ro, rt, product)
        stat_line = ", ".join(f"{k} {v}" for k, v in stats.items())
        if best is None:
            return self.page("Primer3 output", pre(f"PRIMER PICKING RESULTS FOR {name}\n\nNO PRIMERS FOUND\n\n"
                                                   f"Statistics\nPrimers: {stat_line}\n"))
        _, ls, lo, lt, re_, ro, rt, product = best
        rs = re_ - len(ro) + 1
        gc = (100 * sum(c in "GC" for c in o) / len(o) for o in (lo, ro))
        lgc, rgc = gc
        lines = [f"PRIMER PICKING RESULTS FOR {name}", "", "No mispriming library specified",
                 "Using 1-based sequence positions",
                 "OLIGO            start  len      tm     gc%  seq",
                 f"LEFT PRIMER      {ls + 1:>5}  {len(lo):>3}  {lt:6.2f}  {lgc:6.2f}  {lo}",
                 f"RIGHT PRIMER     {re_:>5}  {len(ro):>3}  {rt:6.2f}  {rgc:6.2f}  {ro}",
                 f"SEQUENCE SIZE: {len(template)}", f"INCLUDED REGION SIZE: {len(template)}", "",
                 f"PRODUCT SIZE: {product}", ""]
        marks = [" "] * len(template)
        for i in range(ls, ls + len(lo)):
            marks[i] = ">"
        for i in range(rs - 1, re_):
            marks[i] = "<"
        marks_text = "".join(marks)
        width = len(str(len(template)))
        for i in range(0, len(template), 60):
            lines.append(f"{i + 1:>{width}} {template[i:i + 60]}")
            if marks_text[i:i + 60].strip():
                lines.append(f"{'':>{width}} {marks_text[i:i + 60].rstrip()}")
            lines.append("")
        lines += ["KEYS (in order of precedence):", ">>>>>> left primer", "<<<<<< right primer", "",
                  "Statistics", f"Primers: {stat_line}"]
        return self.page("Primer3 output", pre("\n".join(lines)) + '<p><a href="./">Start over</a></p>')


# Literature search: a small bibliography (titles and abstracts written for this set).
PAPERS = (
    (10890397, "A greedy algorithm for aligning DNA sequences", "Zhang Z, Schwartz S, Wagner L, Miller W",
     "J Comput Biol. 2000", "For aligning DNA sequences that differ only by sequencing errors, or by equivalent "
     "errors from other sources, a greedy algorithm can be much faster than traditional dynamic programming."),
    (9254694, "Gapped BLAST and PSI-BLAST: a new generation of protein database search programs",
     "Altschul SF, Madden TL, Schaffer AA, et al.", "Nucleic Acids Res. 1997",
     "The BLAST programs are widely used tools for searching protein and DNA databases for sequence similarities."),
    (20003500, "BLAST+: architecture and applications", "Camacho C, Coulouris G, Avagyan V, et al.",
     "BMC Bioinformatics. 2009", "Sequence similarity searching is a very important bioinformatics task; BLAST+ is "
     "a new suite of BLAST tools that utilizes the NCBI C++ Toolkit."),
    (30726335, "SequenceServer: a modern graphical user interface for custom BLAST databases",
     "Priyam A, Woodcroft BJ, Rai V, et al.", "Mol Biol Evol. 2019",
     "We present SequenceServer, a tool for running BLAST and visually inspecting BLAST results for biological "
     "interpretation on custom databases."),
    (15215376, "Discovering interesting web services with a service-class-directed crawler",
     "Rocco D, Caverlee J, Liu L, Critchlow T", "Proc. ICWS. 2004",
     "We describe DynaBot, a crawler that discovers and classifies deep web sources such as BLAST services by "
     "probing their forms with example queries and matching the answers against a service class description."),
    (11111111, "Focused crawling: a new approach to topic-specific web resource discovery",
     "Chakrabarti S, van den Berg M, Dom B", "Computer Networks. 1999",
     "A focused crawler seeks out pages relevant to a pre-defined set of topics instead of collecting and indexing "
     "all accessible web documents."),
    (22222222, "Crawling the hidden web", "Raghavan S, Garcia-Molina H", "Proc. VLDB. 2001",
     "Current-day crawlers retrieve content only from the publicly indexable web; we address the problem of "
     "designing a crawler capable of extracting content from the hidden web behind search forms."),
    (6826527, "Sequence of the human insulin gene", "Bell GI, Pictet RL, Rutter WJ, et al.", "Nature. 1980",
     "The nucleotide sequence of the human insulin gene and its flanking regions is reported, with its two "
     "introns."),
    (8159662, "Green fluorescent protein as a marker for gene expression", "Chalfie M, Tu Y, Euskirchen G, et al.",
     "Science. 1994", "A complementary DNA for the Aequorea victoria green fluorescent protein produces a "
     "fluorescent product when expressed in prokaryotic or eukaryotic cells."),
    (7049389, "The structure of human beta-globin mRNA", "Lawn RM, Efstratiadis A, O'Connell C, Maniatis T",
     "Cell. 1980", "The complete nucleotide sequence of the human beta-globin gene and its messenger RNA is "
     "presented, including untranslated regions."),
    (4577744, "Basic local alignment search tool", "Altschul SF, Gish W, Miller W, Myers EW, Lipman DJ",
     "J Mol Biol. 1990", "A new approach to rapid sequence comparison, basic local alignment search tool (BLAST), "
     "directly approximates alignments that optimize a measure of local similarity."),
    (17517101, "Primer3 on the WWW for general users and for biologist programmers", "Rozen S, Skaletsky H",
     "Methods Mol Biol. 2000", "Primer3 picks primers for PCR reactions, considering criteria such as oligonucleotide "
     "melting temperature, size and GC content."),
)


class Literature(Service):
    """A PubMed-like literature search: keyword query, linked results with snippets."""

    title = "LitSearch"
    routes = (("", "start"), ("search", "search"), (r"abstract/(\d+)", "abstract"))

    def page(self, title: str, body: str) -> str:
        return modern_page("LitSearch", title, body, (("/literature/", "Search"), ("/site-search/", "Site search")),
                           blast=False)

    def start(self, req: Req) -> str:
        return """<form action="search" method="get" role="search">
<input type="search" name="term" size="60" aria-label="Search the literature" placeholder="e.g. blast algorithm">
<select name="sort"><option value="relevance" selected>Best match</option><option value="date">Most recent</option>
</select>
<button type="submit">Search</button>
</form>
<p><a href="search?term=blast">Example: blast</a></p>"""

    def search(self, req: Req) -> str:
        methods(req, "GET")
        term = req.get("term").strip()
        words = re.findall(r"\w+", term.lower())
        if not words:
            return self.page("Search", '<p class="text-muted">Enter a search term.</p>')
        found = [p for p in PAPERS if all(w in f"{p[1]} {p[4]}".lower() for w in words)]
        if req.get("sort") == "date":
            found.sort(key=lambda p: -int(p[3].rsplit(" ", 1)[-1]))
        if not found:
            return self.page(f"{escape(term)} - LitSearch", f"<p>No items found for <b>{escape(term)}</b>.</p>")
        items = []
        for pmid, title, authors, journal, abstract in found:
            snippet = escape(abstract[:220])
            for w in set(words):
                snippet = re.sub(rf"(?i)\b({re.escape(w)}\w*)", r"<b>\1</b>", snippet)
            items.append(f'<li><a href="abstract/{pmid}">{escape(title)}</a><br><small>{escape(authors)} '
                         f"{escape(journal)}. PMID: {pmid}</small><p>{snippet}...</p></li>")
        return self.page(f"{term} - LitSearch", f"<p>{len(found)} results</p>\n<ol>\n" + "\n".join(items) + "\n</ol>")

    def abstract(self, req: Req, pmid: str) -> str:
        paper = next((p for p in PAPERS if str(p[0]) == pmid), None)
        if paper is None:
            raise Problem(404, "No such article.")
        return self.page(paper[1], f"<p>{escape(paper[2])}. {escape(paper[3])}.</p><p>{escape(paper[4])}</p>")


class LoginBlast(Service):
    """A BLAST server for consortium members: everything is behind a login that fails."""

    title = "Consortium BLAST"
    routes = (("", "start"), ("login", "login"), ("blast", "blast"), ("register", "register"))

    def page(self, title: str, body: str) -> str:
        return modern_page("Wheat Genome Consortium", title, body, (("/login-blast/", "Sign in"),))

    def start(self, req: Req, error: str = "") -> str:
        alert = f'<div class="alert alert-danger">{escape(error)}</div>' if error else ""
        return self.page("Sign in", f"""{alert}<p>The consortium BLAST server (pre-publication assemblies) is open
to members only. Please sign in.</p>
<form action="login" method="post">
<input type="hidden" name="next" value="/login-blast/blast">
<p><label for="u">Username</label> <input id="u" name="username" autocomplete="username"></p>
<p><label for="pw">Password</label> <input id="pw" type="password" name="password" autocomplete="current-password"></p>
<p><input type="checkbox" name="remember" id="rm"><label for="rm">Remember me</label></p>
<p><button type="submit">Sign in</button> <a href="register">Request an account</a></p>
</form>""")

    def login(self, req: Req) -> str:
        methods(req, "POST")
        if not req.get("username") or not req.get("password"):
            return self.start(req, "Please enter your username and password.")
        return self.start(req, "Invalid username or password.")

    def blast(self, req: Req) -> Resp:
        return redirect("/login-blast/?next=/login-blast/blast")

    def register(self, req: Req) -> str:
        return self.page("Accounts", "<p>Accounts are given to consortium members. Ask your group leader to write "
                                     "to the data coordination centre.</p>")


SITE_PAGES = {
    "terms": ("Terms of use", "The BLAST servers on this site are free for academic use. Automated crawlers and "
                              "scripts must respect robots.txt and submit no more than one job every ten seconds; "
                              "heavy users should install BLAST+ locally."),
    "cite": ("Citing this server", "If these services helped your research, please cite BLAST+ (Camacho et al. "
                                   "2009) and this site."),
    "databases": ("Databases", "Nucleotide databases: nt, est, refseq_rna, 16S rRNA, organelle genomes. Protein "
                               "databases: Swiss-Prot and PDB. Databases are updated every month."),
    "help": ("BLAST help", "Paste your sequence in FASTA format, choose a program and a database, and press BLAST. "
                           "blastn compares nucleotide sequences; blastp compares proteins."),
    "contact": ("Contact", "Questions about the services: write to the web team. We answer within two working "
                           "days."),
}


class SiteSearch(Service):
    """A site search box over this site's help pages."""

    title = "Search this site"
    routes = (("", "start"), ("find", "find"), (r"page/(\w+)", "show"))

    def page(self, title: str, body: str) -> str:
        return modern_page("Bioinformatics Services", title, body, (("/site-search/", "Search"),
                                                                    ("/site-search/page/help", "Help")), blast=False)

    def start(self, req: Req) -> str:
        pages = "".join(f'<li><a href="page/{slug}">{escape(t)}</a></li>' for slug, (t, _) in SITE_PAGES.items())
        return f"""<form action="find" method="get" class="search"><input type="text" name="q" placeholder="Search">
<input type="submit" value="Go"></form>
<h2>Pages</h2><ul>{pages}</ul>"""

    def find(self, req: Req) -> str:
        methods(req, "GET")
        q = req.get("q").strip()
        words = re.findall(r"\w+", q.lower())
        hits = [(slug, t, text) for slug, (t, text) in SITE_PAGES.items()
                if words and all(w in f"{t} {text}".lower() for w in words)]
        if not hits:
            return self.page("Search results", f"<p>Your search - <b>{escape(q)}</b> - did not match any documents."
                                               "</p>")
        items = "".join(f'<li><a href="page/{slug}">{escape(t)}</a><br><span class="snippet">{escape(text[:200])}'
                        "</span></li>\n" for slug, t, text in hits)
        matches = f"{len(hits)} page{'' if len(hits) == 1 else 's'} match"
        return self.page("Search results", f"<p>{matches} <b>{escape(q)}</b>:</p>\n<ul>\n{items}</ul>")

    def show(self, req: Req, slug: str) -> str:
        found = SITE_PAGES.get(slug)
        if found is None:
            raise Problem(404, "Page not found.")
        return self.page(found[0], f"<p>{escape(found[1])}</p>")


class Tutorial(Service):
    """A BLAST tutorial showing a real example report; its only form asks for feedback."""

    title = "BLAST tutorial"
    routes = (("", "start"), ("feedback", "feedback"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.example: str | None = None

    def page(self, title: str, body: str) -> str:
        return modern_page("Bioinformatics Training", title, body, (("/tutorial/", "Tutorial"),
                                                                    ("/site-search/", "Search")), blast=False)

    def start(self, req: Req) -> str:
        with self.lock:
            if self.example is None:
                query = f">example_est\n{record('BX417123.1').letters[200:420]}\n"
                self.example = self.engine.run("blastn", query, ["est"], options=["-task", "blastn"])
        return self.page("BLAST tutorial: reading a blastn report", f"""<p>BLAST compares a query sequence with a
database. This tutorial walks through a blastn report: the header names the program and the database; the
summary lists the sequences producing significant alignments with their bit scores and E values; then each
alignment shows the query and subject lines with identities marked by vertical bars.</p>
<h2>Example output</h2>
<p>This is what blastn printed for a 220-base EST fragment searched against our EST database:</p>
{pre(self.example)}
<h2>Was this page helpful?</h2>
<form action="feedback" method="post">
<input type="radio" name="helpful" value="yes" id="y"><label for="y">Yes</label>
<input type="radio" name="helpful" value="no" id="n"><label for="n">No</label><br>
<label for="c">Comments</label><br><textarea id="c" name="comments" rows="4" cols="60"></textarea><br>
<button type="submit">Send feedback</button>
</form>""")

    def feedback(self, req: Req) -> str:
        methods(req, "POST")
        return self.page("Thank you", "<p>Thank you for your feedback.</p>")


class Submission(Service):
    """A GenBank-like sequence submission form: takes a DNA sequence, answers with an id."""

    title = "Submit a sequence"
    routes = (("", "start"), ("submit", "submit"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.count = 0

    def page(self, title: str, body: str) -> str:
        return classic_page("Sequence Submission Portal", title, body, "Submissions are released on publication.")

    def start(self, req: Req) -> str:
        return """<P>Submit a new nucleotide sequence to the database.</P>
<FORM ACTION="submit" METHOD="POST">
<TABLE>
<TR><TD>Your name</TD><TD><INPUT NAME="submitter" SIZE=40></TD></TR>
<TR><TD>E-mail</TD><TD><INPUT NAME="email" SIZE=40></TD></TR>
<TR><TD>Organism</TD><TD><INPUT NAME="organism" SIZE=40></TD></TR>
<TR><TD>Molecule</TD><TD><SELECT NAME="mol_type"><OPTION>genomic DNA<OPTION>mRNA<OPTION>rRNA</SELECT></TD></TR>
<TR><TD VALIGN=TOP>Sequence</TD><TD><TEXTAREA NAME="sequence" ROWS=8 COLS=70></TEXTAREA></TD></TR>
</TABLE>
<INPUT TYPE="submit" VALUE="Submit sequence">
</FORM>"""

    def submit(self, req: Req) -> str:
        methods(req, "POST")
        queries, _ = read_queries(req.get("sequence"))
        check_alphabet(queries, "nucl")
        if not req.get("email").strip() or "@" not in req.get("email"):
            raise Problem(200, "Please enter a contact e-mail address.")
        if not req.get("organism").strip():
            raise Problem(200, "Please enter the organism (scientific name).")
        if len(queries[0].letters) < 50:
            raise Problem(200, "Sequences shorter than 50 bp are not accepted.")
        with self.lock:
            self.count += 1
            sub = f"SUB{1200000 + self.count}"
        return (f"<P>Thank you. Your submission has been received and assigned the temporary identifier <B>{sub}</B>"
                f".</P><P>{len(queries[0].letters)} bp, {escape(req.get('organism'))}, "
                f"{escape(req.get('mol_type', 'genomic DNA'))}. You will receive an accession number by e-mail within "
                "five working days.</P>")


# ---------------------------------------------------------------------------------------------
# Hostile sites
# ---------------------------------------------------------------------------------------------

BLAST_FORM = """<form action="{action}" method="{method}">
<p>Sequence:<br><textarea name="sequence" rows="8" cols="70"></textarea></p>
<p>Program <select name="program"><option value="blastn">blastn</option></select>
Database <select name="database"><option value="nt">nt</option></select></p>
<p><input type="submit" value="BLAST"></p>
</form>"""


class AlwaysError(Service):
    """Every request answers 500 (a PHP page whose database is down)."""

    title = "BLAST"
    routes = ((".*", "fail"),)

    def fail(self, req: Req) -> Resp:
        body = (BLAST_FORM.format(action="blast.php", method="post") +
                "\n<br />\n<b>Warning</b>:  mysqli_connect(): (HY000/2002): Connection refused in "
                "<b>/var/www/html/blast/db.php</b> on line <b>12</b><br />\n"
                "<b>Fatal error</b>: Uncaught Error: Call to a member function query() on bool")
        return Resp(self.page("BLAST", body), 500)


class Endless(Service):
    """A BLAST form whose job is "still running" forever: each page links to a fresh URL."""

    title = "BLAST"
    routes = (("", "start"), ("run", "wait"), ("check", "wait"))

    def start(self, req: Req) -> str:
        return self.page("BLAST", BLAST_FORM.format(action="run", method="get"))

    def wait(self, req: Req) -> str:
        step = int(req.get("n", "0")) + 1 if req.get("n", "0").isdigit() else 1
        job = secrets.token_hex(8)
        return self.page("Your job is still running",
                         f"<p>Your BLAST job {job} is still running (check {step}).</p>\n"
                         f'<p><a href="check?job={job}&amp;n={step}">Click here</a> to check whether the results '
                         "are ready.</p>")


class OffHost(Service):
    """A BLAST form whose action is on another host (a closed port on 127.0.0.2)."""

    title = "BLAST"

    def start(self, req: Req) -> str:
        return self.page("BLAST (mirror)", "<p>This page is a mirror; searches run on our main server.</p>\n"
                         + BLAST_FORM.format(action=OFFHOST_ACTION, method="post"))


class BigPage(Service):
    """A 10 MB start page: the BLAST form with a select of every organism. The form works."""

    title = "BLAST by organism"
    routes = (("", "start"), ("search", "search"))

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.body: bytes | None = None

    def start(self, req: Req) -> Resp:
        with self.lock:
            if self.body is None:
                self.body = self.build()
        return Resp(self.body)

    @staticmethod
    def build() -> bytes:
        rng = random.Random(7)
        syllables = ("ba", "co", "di", "fu", "ga", "li", "mo", "nu", "ra", "si", "to", "ve", "xa", "zo", "phy", "ter")
        head = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>BLAST by organism</title></head><body>\n'
                '<h1>BLAST by organism</h1>\n<form action="search" method="post">\n<p>Sequence:<br>'
                '<textarea name="sequence" rows="8" cols="70"></textarea></p>\n<p>Organism: <select name="taxon">\n'
                '<option value="all" selected>All organisms</option>\n')
        tail = ('</select></p>\n<p><input type="submit" value="BLAST"></p>\n</form>\n</body></html>\n')
        parts, size, taxid = [head], len(head) + len(tail), 1000
        while size < BIG_PAGE_BYTES:
            genus = "".join(rng.choices(syllables, k=3)).capitalize()
            species = "".join(rng.choices(syllables, k=3)) + "us"
            option = f'<option value="{taxid}">{genus} {species} (taxid:{taxid})</option>\n'
            parts.append(option)
            size += len(option)
            taxid += 1
        parts.append(tail)
        return "".join(parts).encode()

    def search(self, req: Req) -> str:
        methods(req, "POST")
        queries, _ = read_queries(req.get("sequence"))
        check_alphabet(queries, "nucl")
        return pre(self.engine.run("blastn", to_fasta(queries), ["nt"]))


class Admin(Service):
    """``/admin/``: disallowed by robots.txt; a polite crawler never asks for it."""

    title = "Queue administration"
    routes = (("", "start"), ("purge", "purge"))

    def start(self, req: Req) -> str:
        return self.page(self.title, '<p>3 jobs running, 12 queued.</p><form action="purge" method="post">'
                                     '<input type="submit" value="Purge finished jobs"></form>\n'
                         + BLAST_FORM.format(action="/admin/purge", method="post"))

    def purge(self, req: Req) -> str:
        return self.page(self.title, "<p>Purged.</p>")


class Records(Service):
    """``/ncbi/...``: the record pages BLAST+ ``-html`` reports link to, kept on this host."""

    routes = ((".*", "show"),)

    def show(self, req: Req) -> str:
        key = req.path.split("/")[-1] or "record"
        seqid = key.split("?")[0]
        found = next((r for r in NUCLEOTIDE_RECORDS + PROTEIN_RECORDS if seqid and seqid in r.seqid), None)
        text = f"{found.seqid} {found.title}, {len(found.letters)} letters." if found else "Record not found."
        return self.page(f"Record {seqid}", f"<p>{escape(text)}</p>")


# ---------------------------------------------------------------------------------------------
# The site
# ---------------------------------------------------------------------------------------------


class Static(Resource):
    isLeaf = True

    def __init__(self, body: bytes, content_type: bytes) -> None:
        super().__init__()
        self.body, self.content_type = body, content_type

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"Content-Type", self.content_type)
        return self.body


class HitLog(Resource):
    """``/__hits`` (the log as JSON) and ``/__reset`` (clear it), as in webrace.demo.services."""

    isLeaf = True

    def __init__(self, hits: list[dict], clear: bool) -> None:
        super().__init__()
        self.hits, self.clear = hits, clear

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"Content-Type", b"application/json")
        if self.clear:
            self.hits.clear()
            return b"[]"
        return json.dumps(self.hits).encode()


class LoggingSite(Site):
    """Records every request but the log's own: path, method, query, body size, User-Agent and,
    once answered, status."""

    def __init__(self, resource: Resource, hits: list[dict]) -> None:
        super().__init__(resource)
        self.hits = hits

    def getResourceFor(self, request: Request) -> Resource:
        path = request.path.decode("utf-8", "replace")
        if path not in ("/__hits", "/__reset"):
            request.content.seek(0, 2)
            hit = {"path": path, "method": request.method.decode(),
                   "query": request.uri.partition(b"?")[2].decode("latin-1"),
                   "body_size": request.content.tell(),
                   "user_agent": (request.getHeader(b"user-agent") or b"").decode("latin-1"), "status": None}
            request.content.seek(0)
            self.hits.append(hit)
            request.notifyFinish().addBoth(lambda _: hit.update(status=request.code))
        return super().getResourceFor(request)


def local_opener() -> urllib.request.OpenerDirector:
    """A urllib opener that ignores proxy settings: these services are on 127.0.0.1."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Listing:
    name: str  # its path prefix
    build: Callable[[Engine], Resource]
    member_of: tuple[str, ...]  # the service classes it belongs to
    kind: str = "listed"  # "listed": a start URL; "hostile": listed apart; "hidden": neither
    note: str = ""  # a judgement call, when membership is one


SERVICES = (
    Listing("ncbi-select", ClassicSelects, ("nucleotide_blast", "protein_blast")),
    Listing("sequenceserver", SequenceServerLike, ("nucleotide_blast", "protein_blast")),
    Listing("jobqueue", JobQueue, ("nucleotide_blast",)),
    Listing("redirect303", SeeOther, ("nucleotide_blast",)),
    Listing("iframe", IframeReport, ("nucleotide_blast",)),
    Listing("download", DownloadOnly, ("nucleotide_blast",)),
    Listing("fasta-required", FastaRequired, ("nucleotide_blast",)),
    Listing("upload", UploadOnly, ("nucleotide_blast",)),
    Listing("wizard", Wizard, ("nucleotide_blast", "protein_blast")),
    Listing("jobtitle", JobTitle, ("nucleotide_blast",)),
    Listing("tabular", Tabular, ("nucleotide_blast",),
            note="a blastn hit table (-outfmt 7) without alignments: decided a member, since a person looking "
                 "for a nucleotide BLAST service gets one; its pages hold no alignment to recognise"),
    Listing("nohits", NoHits, ("nucleotide_blast",),
            note="a member whose answer to almost any query is 'No hits found' (organelle genomes, E <= 0.001)"),
    Listing("blastp-only", BlastpOnly, ("protein_blast",)),
    Listing("blastx", Blastx, (),
            note="decided not a nucleotide BLAST member: it takes DNA but searches proteins, and its alignments "
                 "are of protein letters; not a protein BLAST member either (its query is DNA)"),
    Listing("revcomp", ReverseComplement, ()),
    Listing("primer", PrimerDesign, ()),
    Listing("literature", Literature, ("keyword_search",)),
    Listing("login-blast", LoginBlast, (),
            note="a BLAST server, but nothing of it is reachable without an account: not a member"),
    Listing("site-search", SiteSearch, ("keyword_search",),
            note="a keyword search over five help pages: most words find nothing"),
    Listing("tutorial", Tutorial, (),
            note="a real blastn report on its start page, but no search: its form sends feedback"),
    Listing("submission", Submission, ()),
    Listing("error500", AlwaysError, (), kind="hostile"),
    Listing("endless", Endless, (), kind="hostile"),
    Listing("offhost", OffHost, (), kind="hostile"),
    Listing("bigpage", BigPage, (), kind="hostile"),
    Listing("admin", Admin, (), kind="hidden"),
    Listing("ncbi", Records, (), kind="hidden"),
)
LISTED = tuple(s for s in SERVICES if s.kind == "listed")
HOSTILE = tuple(s for s in SERVICES if s.kind == "hostile")


def build_site(engine: Engine) -> LoggingSite:
    hits: list[dict] = []
    root = Resource()
    built = {s.name: s.build(engine) for s in SERVICES}
    links = "".join(f'<li><a href="/{s.name}/">{escape(built[s.name].title)}</a></li>\n' for s in LISTED)
    index = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Bioinformatics services</title></head>\n'
             f'<body>\n<h1>Bioinformatics services</h1>\n<ul>\n{links}</ul>\n<p><a href="/admin/">Administration'
             "</a></p>\n</body></html>\n")
    root.putChild(b"", Static(index.encode(), b"text/html; charset=utf-8"))
    root.putChild(b"robots.txt", Static(ROBOTS_TXT, b"text/plain"))
    root.putChild(b"__hits", HitLog(hits, clear=False))
    root.putChild(b"__reset", HitLog(hits, clear=True))
    for name, resource in built.items():
        root.putChild(name.encode(), resource)
    return LoggingSite(root, hits)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python holdout/holdout_services.py",
                                     description="DynaBot's hold-out services on 127.0.0.1, until Ctrl-C.")
    parser.add_argument("--port", type=int, default=0, help="0 (default): any free port")
    parser.add_argument("--seeds", default="", metavar="FILE",
                        help="write the listed start pages here, one per line (default: none)")
    args = parser.parse_args(argv)
    from twisted.internet import reactor  # installed only here: importers of this module keep their own
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    globalLogBeginner.beginLoggingTo(
        [FilteringLogObserver(textFileLogObserver(sys.stderr), [LogLevelFilterPredicate(LogLevel.warn)])],
        redirectStandardIO=False)
    with tempfile.TemporaryDirectory(prefix="holdout-blastdb-") as tmp:
        try:
            engine = Engine(Path(tmp))
        except (RuntimeError, subprocess.SubprocessError) as error:
            sys.exit(f"holdout_services: {error}")
        reactor.suggestThreadPoolSize(16)
        port = reactor.listenTCP(args.port, build_site(engine), interface=HOST)
        base = f"http://{HOST}:{port.getHost().port}"
        print(f"{base}/  DynaBot's hold-out services (Ctrl-C stops them)", flush=True)  # first line: read by clients
        for s in LISTED:
            print(f"  {base}/{s.name}/  {', '.join(s.member_of) or '(member of no class)'}")
        for s in HOSTILE:
            print(f"  {base}/{s.name}/  (hostile)")
        if args.seeds:
            Path(args.seeds).write_text("".join(f"{base}/{s.name}/\n" for s in LISTED), encoding="utf-8")
            print(f"seeds: {Path(args.seeds).resolve()} ({len(LISTED)} start pages)")
        sys.stdout.flush()
        reactor.run()


# ---------------------------------------------------------------------------------------------
# The client side: start, address, inspect, stop
# ---------------------------------------------------------------------------------------------


class HoldoutServices:
    """The hold-out services in a subprocess on 127.0.0.1 and a free port:
    ``with HoldoutServices() as s: s.members["nucleotide_blast"]``."""

    def __init__(self, start_timeout: float = 60.0) -> None:
        self.base = ""
        self.start_timeout = start_timeout
        self._process: subprocess.Popen | None = None
        self._stderr = None

    def start(self) -> HoldoutServices:
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen([sys.executable, str(SCRIPT), "--port", "0"],
                                         stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        ready, _, _ = select.select([self._process.stdout], [], [], self.start_timeout)
        line = self._process.stdout.readline().strip() if ready else ""
        if not line.startswith(f"http://{HOST}:"):
            self._stderr.seek(0)
            why = self._stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:]
            self.stop()
            raise RuntimeError(f"the hold-out services did not start: {line or (why and why[0]) or 'no address'}")
        self.base = line.split("/ ", 1)[0]
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process.stdout.close()
            self._process = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> HoldoutServices:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def url(self, name: str) -> str:
        """A service's start URL by name (``"jobqueue"``), or any path (``"/robots.txt"``)."""
        if any(s.name == name for s in SERVICES):
            return f"{self.base}/{name}/"
        return f"{self.base}/{name.lstrip('/')}"

    @property
    def members(self) -> dict[str, list[str]]:
        """Service class -> the start URLs of its members."""
        return {c: [self.url(s.name) for s in LISTED if c in s.member_of] for c in CLASSES}

    @property
    def non_members(self) -> dict[str, list[str]]:
        """Service class -> the start URLs of the listed services that are not its members."""
        return {c: [self.url(s.name) for s in LISTED if c not in s.member_of] for c in CLASSES}

    @property
    def hostile(self) -> list[str]:
        """Start URLs of the hostile sites (members of no class; a crawler must survive them)."""
        return [self.url(s.name) for s in HOSTILE]

    @property
    def judgement_calls(self) -> dict[str, str]:
        """Start URL -> why its membership is a decision rather than obvious."""
        return {self.url(s.name): s.note for s in LISTED if s.note}

    def hits(self) -> list[dict]:
        """Every request the server has received since the start or the last ``reset``."""
        with local_opener().open(f"{self.base}/__hits", timeout=30) as answer:
            return json.loads(answer.read())

    def reset(self) -> None:
        with local_opener().open(f"{self.base}/__reset", timeout=30) as answer:
            answer.read()


if __name__ == "__main__":
    main()
