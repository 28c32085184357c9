"""Hold-out set 2: local imitations of real public BLAST web servers, and their neighbours.

``python holdout/holdout2_services.py --port 0`` builds small BLAST databases from FASTA written
here, serves one Twisted site on 127.0.0.1 and prints its base URL as its first line. Every
service lives under its own path prefix (see ``SERVICES``); ``holdout/holdout2_services.md``
says what each imitates. Results come from the real BLAST+ programs (no shell, bounded input,
a timeout). Nothing is ever fetched from elsewhere: links to the internet point at ``/offsite``.

``Holdout2Services`` starts the server in a subprocess for a test or a benchmark::

    with Holdout2Services() as hs:
        hs.members["nucleotide_blast"]   # start URLs of the nucleotide BLAST services
"""

from __future__ import annotations

import argparse
import html
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
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

# ---------------------------------------------------------------------------------------------
# Services: name -> (start path, classes it belongs to). Non-members are listed per class.

SERVICES = {
    # nucleotide BLAST services (most also run blastp)
    "ncbi": "/ncbi/Blast.cgi?PROGRAM=blastn&PAGE_TYPE=BlastSearch&LINK_LOC=blasthome",
    "ncbi_blastp": "/ncbi/Blast.cgi?PROGRAM=blastp&PAGE_TYPE=BlastSearch&LINK_LOC=blasthome",
    "ebi": "/ebi/Tools/sss/ncbiblast/nucleotide.html",
    "ebi_protein": "/ebi/Tools/sss/ncbiblast/",
    "sequenceserver": "/sequenceserver/",
    "flybase": "/flybase/blast/",
    "wormbase": "/wormbase/tools/blast_blat",
    "viroblast": "/viroblast/viroblast.php",
    "wwwblast": "/wwwblast/blast.html",
    # neighbours
    "uniprot": "/uniprot/blast/",
    "translate": "/expasy/translate/",
    "orffinder": "/orffinder/",
    "img": "/img/cgi-bin/main.cgi?section=FindGenesBlast&page=geneSearchBlast",
    "bankit": "/bankit/",
    "entrez": "/entrez/",
}
MEMBERS = {
    "nucleotide_blast": ["ncbi", "ebi", "sequenceserver", "flybase", "wormbase", "viroblast", "wwwblast"],
    "protein_blast": ["ncbi_blastp", "ebi_protein", "sequenceserver", "flybase", "wormbase", "viroblast",
                      "wwwblast", "uniprot"],
    "keyword_search": ["entrez"],
}
NON_MEMBERS = {
    "nucleotide_blast": ["uniprot", "translate", "orffinder", "img", "bankit", "entrez", "ncbi_blastp"],
    "protein_blast": ["ncbi", "translate", "orffinder", "img", "bankit", "entrez"],
    "keyword_search": ["translate", "orffinder", "img", "bankit", "ncbi"],
}


class Holdout2Services:
    """Runs this module in a subprocess; ``.base``, ``.url(name)``, ``.members``, ``.non_members``."""

    def __init__(self, port: int = 0, timeout: float = 60.0):
        self.port, self.timeout = port, timeout
        self.proc: subprocess.Popen | None = None
        self.base = ""
        self.members: dict[str, list[str]] = {}
        self.non_members: dict[str, list[str]] = {}
        self.hostile: list[str] = []

    def url(self, name: str) -> str:
        return self.base + SERVICES[name]

    def __enter__(self) -> Holdout2Services:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--port", str(self.port)],
                                     stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line.startswith("http://"):
            self.__exit__(None, None, None)
            raise RuntimeError(f"holdout2 services did not start (first line {line!r})")
        self.base = line.rstrip("/")
        self.members = {cls: [self.url(n) for n in names] for cls, names in MEMBERS.items()}
        self.non_members = {cls: [self.url(n) for n in names] for cls, names in NON_MEMBERS.items()}
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()


# ---------------------------------------------------------------------------------------------
# Sequences, authored here. The two example queries of serviceclasses/nucleotide_blast.xml and
# the one of protein_blast.xml; the databases hold ~95% identical copies inside longer records.

EX_DNA1 = ("CTGCATCAGTAATTTTAATAGAGACTCTTAGTGGTTATCAACAACTGGTCAGTTGTTTTTTTTTTTTTCCACACTGCTCTCTGGATTCG"
           "AACCTAGTGAATTCTGGGCTCAGTCCTCCTCCATCTCTTTCTTGATCCAGTCCACGTAGTTGAGCACTTTGGTGTAGAAGCCATAGCC"
           "CCTGCTGCACCCGATGCCCCAGGACACGATGCCCGTGGCCACCCAGCGATCAGTGTTCGGGTCCCTTACTGGAAAAACGCCCCCACTA"
           "TCCCCCTGGCAGGCGTCCTGCTTTAAAGATGGGTGGCCCGCCACAAACATGTTTTGGGAAAACACAACCATTCTA")
EX_DNA2 = ("AACTAATTGCCTCACATTGTCACTGCAAATCGACACCTATTAATGGGTCTCACCTCCCAACTGCTTCCCCCTCTGTTCTTCCTGCTAGC"
           "ATGTGCCGG")
EX_PROT = ("MALWMRLLPLLALLALWGPDPAAAFVNQHLCGSHLVEALYLVCGERGFFYTPKTRREAEDLQVGQVELGGGPGAGSLQPLALEGSLQKRG"
           "IVEQCCTSICSLYQLENYCN")
MAX_RESIDUES = 20000
BLAST_TIMEOUT = 60


def _dna(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("ACGT") for _ in range(n))


def _prot(rng: random.Random, n: int) -> str:
    return "M" + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(n - 1))


def mutate(seq: str, period: int = 60, at: tuple[int, ...] = (7, 19, 31), alphabet: str = "ACGT") -> str:
    """Substitutions at fixed offsets of each period: (7, 19, 31) of 60 is 95% identity."""
    out = []
    for i, c in enumerate(seq):
        if i % period in at:
            c = alphabet[(alphabet.index(c) + 1 + i % 3) % len(alphabet)]
        out.append(c)
    return "".join(out)


def revcomp(seq: str) -> str:
    return seq.translate(str.maketrans("ACGTUNacgtun", "TGCAANtgcaan"))[::-1]


CODONS = {a + b + c: "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"[16 * i + 4 * j + k]
          for i, a in enumerate("TCAG") for j, b in enumerate("TCAG") for k, c in enumerate("TCAG")}


def translate(seq: str) -> str:
    seq = seq.upper().replace("U", "T")
    return "".join(CODONS.get(seq[i:i + 3], "X") for i in range(0, len(seq) - 2, 3))


def sequences() -> dict[str, list[tuple[str, str]]]:
    """FASTA records of each database: name -> [(defline, sequence)]."""
    rng = random.Random(2004)
    hit1 = _dna(rng, 420) + mutate(EX_DNA1) + _dna(rng, 380)
    hit2 = _dna(rng, 250) + mutate(EX_DNA2) + _dna(rng, 610)
    far1 = _dna(rng, 150) + mutate(EX_DNA1, 60, (5, 17, 29, 41, 53)) + _dna(rng, 200)
    minus2 = _dna(rng, 300) + revcomp(mutate(EX_DNA2, 60, (11, 37, 50))) + _dna(rng, 90)
    nt = [
        ("HX401187.1 Mus musculus strain C57BL/6J chromosome 7 clone RP23-118K4, complete sequence", hit1),
        ("HX402233.2 Danio rerio zgc:113142 mRNA, partial cds", hit2),
        ("HX409914.1 Rattus norvegicus clone CH230-52M7 genomic sequence, partial", far1),
        ("HX410020.1 Gallus gallus BAC clone CH261-40B3 from chromosome 2, complete sequence", minus2),
        ("HX411305.1 Lumbricus terrestris (common earthworm, night crawler) cytochrome oxidase subunit I gene, "
         "partial cds; mitochondrial", _dna(rng, 658)),
        ("HX411306.1 Eisenia hortensis (European nightcrawler) 18S ribosomal RNA gene, partial sequence",
         _dna(rng, 1720)),
        ("HX412871.1 Drosophila melanogaster clone RE04552 cDNA sequence", _dna(rng, 1230)),
        ("HX413390.1 Caenorhabditis elegans cosmid F56D2, complete sequence", _dna(rng, 2400)),
        ("HX414051.1 Human immunodeficiency virus 1 isolate 02ZAPS045 env gene, partial cds", _dna(rng, 870)),
        ("HX415662.1 Plasmodium falciparum 3D7 apical membrane antigen 1 (AMA1) mRNA, complete cds",
         _dna(rng, 1869)),
    ]
    genome = [
        ("HXchr2L assembly HX-R1 chromosome arm 2L", _dna(rng, 6000) + hit1 + _dna(rng, 4000)),
        ("HXchr3R assembly HX-R1 chromosome arm 3R", _dna(rng, 3000) + revcomp(hit2) + _dna(rng, 7000)),
        ("HXchrX assembly HX-R1 chromosome X", _dna(rng, 9000)),
    ]
    est = [(f"HX9{70000 + i}.1 EST library HXL{i % 7} clone {i:05d} 5' similar to unknown protein, mRNA sequence",
            _dna(rng, rng.randrange(300, 700))) for i in range(24)]
    insulin = mutate(EX_PROT, 11, (4,), "ACDEFGHIKLMNPQRSTVWY")
    orf1 = translate(mutate(EX_DNA1)[1:]).replace("*", "G")
    prot = [
        ("sp|P9HX01|INS_HOLD Insulin OS=Holdout organism OX=99001 GN=INS PE=1 SV=1", insulin),
        ("sp|P9HX02|INSL_HOLD Insulin-like peptide OS=Holdout organism OX=99001 GN=INSL PE=2 SV=1",
         mutate(insulin, 7, (2, 5), "ACDEFGHIKLMNPQRSTVWY")),
        ("tr|A0HX03|A0HX03_MOUSE Uncharacterized protein OS=Mus musculus OX=10090 PE=4 SV=1", _prot(rng, 40) + orf1),
        ("sp|P9HX04|COX1_LUMTE Cytochrome c oxidase subunit 1 OS=Lumbricus terrestris OX=6398 GN=COI PE=3 SV=1",
         _prot(rng, 219)),
        ("sp|P9HX05|AMA1_PLAF7 Apical membrane antigen 1 OS=Plasmodium falciparum OX=36329 GN=AMA1 PE=1 SV=1",
         _prot(rng, 622)),
        ("tr|A0HX06|A0HX06_DROME Uncharacterized protein OS=Drosophila melanogaster OX=7227 PE=4 SV=1",
         _prot(rng, 310)),
        ("sp|P9HX07|ENV_HV1HX Envelope glycoprotein gp160 OS=Human immunodeficiency virus 1 OX=11676 GN=env PE=1",
         _prot(rng, 290)),
    ]
    pdb = [(f"pdb|9HX{i}|A Chain A, hypothetical protein {i}", _prot(rng, rng.randrange(90, 300))) for i in range(6)]
    return {"nt": nt, "genome": genome, "est": est, "prot": prot, "pdb": pdb}


DBTYPE = {"nt": "nucl", "genome": "nucl", "est": "nucl", "prot": "prot", "pdb": "prot"}
DATA: dict[str, object] = {"dir": None, "records": {}}


def build_databases(root: Path) -> None:
    recs = sequences()
    for name, records in recs.items():
        fasta = root / f"{name}.fasta"
        fasta.write_text("".join(f">{d}\n" + "\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n"
                                 for d, s in records))
        subprocess.run(["makeblastdb", "-in", str(fasta), "-dbtype", DBTYPE[name], "-out", str(root / name),
                        "-parse_seqids", "-title", name], check=True, capture_output=True, timeout=120)
    DATA["dir"], DATA["records"] = root, recs


# ---------------------------------------------------------------------------------------------
# Queries and BLAST runs

class InputError(Exception):
    """A bad submission: the service answers it with its own error page."""


@dataclass
class Query:
    fasta: str
    residues: str
    kind: str  # "dna" or "protein"
    title: str


def parse_query(text: str, files: str = "") -> Query:
    text = (text or "").strip() or (files or "").strip()
    if not text:
        raise InputError("No query sequence was entered.")
    if len(text) > 4 * MAX_RESIDUES:
        raise InputError("The query is too long.")
    title, lines = "", []
    for line in text.splitlines():
        if line.startswith(">"):
            title = title or line[1:].strip()
            lines.append("\n" + line.strip()[:200] + "\n")
        else:
            lines.append(re.sub(r"[\s\d]", "", line))
    seq = "".join(lines).strip()
    residues = "".join(x for x in seq.split("\n") if not x.startswith(">"))
    if not residues:
        raise InputError("The query contains no sequence.")
    if len(residues) > MAX_RESIDUES:
        raise InputError(f"The query is longer than {MAX_RESIDUES} letters.")
    if re.search(r"[^A-Za-z*\-]", residues):
        raise InputError("The query contains characters that are not sequence letters.")
    dna = sum(residues.upper().count(c) for c in "ACGTUN")
    kind = "dna" if dna >= 0.9 * len(residues) else "protein"
    return Query(seq if seq.startswith(">") else seq, residues, kind, title or "Query_1")


NUCL_QUERY = {"blastn": True, "blastx": True, "tblastx": True, "blastp": False, "tblastn": False}
NUCL_DB = {"blastn": True, "tblastn": True, "tblastx": True, "blastp": False, "blastx": False}


def check_program(program: str, query: Query, db: str) -> None:
    if program not in NUCL_QUERY:
        raise InputError(f"Unknown program {program!r}.")
    if NUCL_QUERY[program] != (query.kind == "dna"):
        raise InputError(f"{program} needs a {'nucleotide' if NUCL_QUERY[program] else 'protein'} query, "
                         f"the sequence entered looks like {'DNA' if query.kind == 'dna' else 'protein'}.")
    if any(NUCL_DB[program] != (DBTYPE[d] == "nucl") for d in db.split()):
        raise InputError(f"{program} searches a {'nucleotide' if NUCL_DB[program] else 'protein'} database.")


@dataclass
class Job:
    id: str
    program: str
    db: str
    query: Query
    options: dict = field(default_factory=dict)
    status: str = "RUNNING"
    error: str = ""
    submitted: float = field(default_factory=time.time)
    ready_at: float = 0.0
    archive: str = ""

    def state(self) -> str:
        if self.status == "FINISHED" and time.time() < self.ready_at:
            return "RUNNING"
        return self.status


JOBS: dict[str, Job] = {}
_JOB_LOCK = threading.Lock()
_BLAST_SLOTS = threading.BoundedSemaphore(2)


def run_tool(argv: list[str], stdin: str = "") -> str:
    with _BLAST_SLOTS:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=BLAST_TIMEOUT)
    if done.returncode != 0:
        raise InputError((done.stderr.strip().splitlines() or ["BLAST failed"])[-1][:300])
    return done.stdout


def search_argv(job: Job) -> list[str]:
    o = job.options
    dbs = " ".join(str(DATA["dir"] / d) for d in job.db.split())
    argv = [job.program, "-db", dbs, "-outfmt", "11", "-out", job.archive, "-evalue", str(o.get("evalue", 10)),
            "-max_target_seqs", str(o.get("max_target_seqs", 100))]
    if job.program == "blastn":
        argv += ["-task", o.get("task", "megablast"), "-dust", "yes" if o.get("filter", True) else "no"]
        if o.get("word_size"):
            argv += ["-word_size", str(o["word_size"])]
    elif job.program in ("blastp", "blastx"):
        argv += ["-seg", "yes" if o.get("filter") else "no"]
        if o.get("matrix"):
            argv += ["-matrix", o["matrix"]]
    if o.get("query_loc"):
        argv += ["-query_loc", o["query_loc"]]
    return argv


def _run_job(job: Job) -> None:
    try:
        run_tool(search_argv(job), job.query.fasta)
        job.status = "FINISHED"
    except (InputError, subprocess.TimeoutExpired, OSError) as e:
        job.status, job.error = "ERROR", str(e)[:300]


def submit(program: str, db: str, query: Query, *, prefix: str = "", delay: float = 0.0, **options) -> Job:
    """Starts a search in a thread; the job reads as RUNNING for at least ``delay`` seconds."""
    check_program(program, query, db)
    job = Job(prefix + uuid.uuid4().hex[:12], program, db, query, options)
    job.archive = str(DATA["dir"] / f"job-{job.id}.asn")
    job.ready_at = job.submitted + delay
    with _JOB_LOCK:
        if len(JOBS) >= 400:
            old = JOBS.pop(next(iter(JOBS)))
            Path(old.archive).unlink(missing_ok=True)
        JOBS[job.id] = job
    threading.Thread(target=_run_job, args=(job,), daemon=True).start()
    return job


def wait(job: Job, limit: float = BLAST_TIMEOUT + 5) -> Job:
    end = time.time() + limit
    while job.status == "RUNNING" and time.time() < end:
        time.sleep(0.05)
    return job


def report(job: Job, outfmt: str = "0", html_: bool = False, descriptions: int = 100, alignments: int = 50) -> str:
    """The finished job's archive formatted by the real blast_formatter."""
    argv = ["blast_formatter", "-archive", job.archive, "-outfmt", outfmt]
    if outfmt.split()[0] in "01234":
        argv += ["-num_descriptions", str(descriptions), "-num_alignments", str(alignments)]
    if html_:
        argv.append("-html")
    return run_tool(argv)


def pre_of(html_report: str) -> str:
    """The <PRE> body of a BLAST -html report, its links to the internet made local."""
    m = re.search(r"<PRE>(.*)</PRE>", html_report, re.S | re.I)
    return localize(m.group(1) if m else html.escape(html_report))


def offsite(url: str) -> str:
    return "/offsite?" + urlencode({"url": url})


def localize(markup: str) -> str:
    return re.sub(r"""(?i)(href|src)\s*=\s*(["'])(https?:)?//[^"']*\2""",
                  lambda m: f'{m.group(1)}="{offsite(m.group(0).split(m.group(2))[1])}"', markup)


@dataclass
class Hit:
    id: str
    title: str
    length: int
    hsps: list[dict]


def hits_of(job: Job) -> list[Hit]:
    """The hits of a finished job, read from BLAST's XML (outfmt 5)."""
    root = ET.fromstring(report(job, "5"))
    out = []
    for h in root.iter("Hit"):
        hsps = [{c.tag.removeprefix("Hsp_"): c.text or "" for c in hsp} for hsp in h.iter("Hsp")]
        out.append(Hit(h.findtext("Hit_id", ""), h.findtext("Hit_def", ""), int(h.findtext("Hit_len", "0")), hsps))
    return out


def aligned_lines(hsp: dict, qname: str = "Query", sname: str = "Sbjct", width: int = 60,
                  nucleotide: bool = True) -> str:
    """One HSP's alignment as text lines with coordinates, the way front ends write it."""
    q, m, s = hsp["qseq"], hsp["midline"], hsp["hseq"]
    qpos, spos = int(hsp["query-from"]), int(hsp["hit-from"])
    qstep = -1 if int(hsp["query-to"]) < qpos else 1
    sstep = -1 if int(hsp["hit-to"]) < spos else 1
    qmul = 3 if not nucleotide and int(hsp.get("query-frame", "0") or 0) else 1
    pad = max(len(qname), len(sname))
    lines = []
    for i in range(0, len(q), width):
        qs, ms, ss = q[i:i + width], m[i:i + width], s[i:i + width]
        qn = sum(c != "-" for c in qs) * qmul
        sn = sum(c != "-" for c in ss)
        qend, send = qpos + qstep * (qn - 1), spos + sstep * (sn - 1)
        lines.append(f"{qname:<{pad}}  {qpos:<5} {qs}  {qend}")
        lines.append(f"{'':<{pad}}  {'':<5} {ms}")
        lines.append(f"{sname:<{pad}}  {spos:<5} {ss}  {send}")
        lines.append("")
        qpos, spos = qend + qstep, send + sstep
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The web layer: one leaf resource, routes by path regex; a handler returns a page (str), a Resp
# or a Deferred of one. Slow work (BLAST, blast_formatter) runs in threads.

@dataclass
class Resp:
    body: str | bytes
    status: int = 200
    ctype: str = "text/html; charset=utf-8"
    headers: dict = field(default_factory=dict)


class Req:
    def __init__(self, request):
        self.request = request
        self.method = request.method.decode()
        self.path = request.path.decode("utf-8", "replace")
        self.args = {k.decode("utf-8", "replace"): [v.decode("utf-8", "replace") for v in vs]
                     for k, vs in (request.args or {}).items()}

    def get(self, name: str, default: str = "") -> str:
        vals = self.args.get(name)
        return vals[0] if vals else default

    def getlist(self, name: str) -> list[str]:
        return self.args.get(name, [])

    def cookie(self, name: str) -> str:
        v = self.request.getCookie(name.encode())
        return v.decode("utf-8", "replace") if v else ""


ROUTES: list[tuple[re.Pattern, object]] = []


def route(pattern: str):
    def deco(fn):
        ROUTES.append((re.compile(pattern), fn))
        return fn
    return deco


def redirect(url: str, status: int = 303) -> Resp:
    return Resp(f'<html><body><a href="{html.escape(url)}">{html.escape(url)}</a></body></html>', status,
                headers={"Location": url})


def text(body: str, ctype: str = "text/plain; charset=utf-8") -> Resp:
    return Resp(body, ctype=ctype)


def page(title: str, body: str, head: str = "", style: str = "") -> str:
    css = f"<style>{style}</style>" if style else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"{css}{head}</head>\n<body>\n{body}\n</body></html>\n")


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def options(pairs, selected: str = "") -> str:
    return "".join(f'<option value="{esc(v)}"{" selected" if v == selected else ""}>{esc(label)}</option>'
                   for v, label in pairs)


def later(fn, *args):
    from twisted.internet import threads
    return threads.deferToThread(fn, *args)


def make_site():
    from twisted.internet.defer import Deferred
    from twisted.web import resource, server

    class Root(resource.Resource):
        isLeaf = True

        def render(self, request):
            req = Req(request)
            gone = []
            request.notifyFinish().addErrback(lambda _: gone.append(1))
            found = [(fn, m) for pattern, fn in ROUTES if (m := pattern.fullmatch(req.path))]
            if not found:
                return self.send(request, Resp(page("404 Not Found", "<h1>Not Found</h1><p>The requested URL "
                                                    "was not found on this server.</p>"), 404))
            fn, m = found[0]
            try:
                out = fn(req, *m.groups())
            except InputError as e:
                out = error_page(str(e))
            if not isinstance(out, Deferred):
                return self.send(request, out)

            def done(result):
                if not gone:
                    request.write(self.send(request, result))
                    request.finish()

            def failed(f):
                done(error_page(str(f.value)) if f.check(InputError) else
                     Resp(page("500 Internal Server Error", "<h1>Internal Server Error</h1>"), 500))
            out.addCallbacks(done, failed)
            return server.NOT_DONE_YET

        def send(self, request, out) -> bytes:
            if not isinstance(out, Resp):
                out = Resp(out)
            request.setResponseCode(out.status)
            request.setHeader(b"Content-Type", out.ctype.encode())
            request.setHeader(b"Server", b"Apache")
            for k, v in out.headers.items():
                if k.lower() == "set-cookie":
                    request.addCookie(*v)
                else:
                    request.setHeader(k.encode(), str(v).encode())
            return out.body.encode("utf-8") if isinstance(out.body, str) else out.body

    site = server.Site(Root())
    site.displayTracebacks = False
    return site


def error_page(message: str) -> Resp:
    return Resp(page("Error", f'<h1>Error</h1>\n<p class="error">{esc(message)}</p>\n'
                              '<p><a href="javascript:history.back()">Back</a></p>'))


@route(r"/")
def home(req):
    items = "".join(f'<li><a href="{esc(path)}">{esc(name)}</a></li>' for name, path in SERVICES.items())
    return page("Hold-out 2 services", f"<h1>Sequence analysis services</h1><ul>{items}</ul>")


@route(r"/robots\.txt")
def robots(req):
    return text("User-agent: *\nDisallow: /flybase/cgi-bin/admin/\n")


@route(r"/offsite")
def offsite_page(req):
    url = req.get("url")
    return page("Leaving this site", f"<h1>External link</h1><p>This copy of the site does not follow links to "
                f"the internet. The original link pointed to <code>{esc(url)}</code>.</p><p><a href='/'>Home</a></p>")


# ---------------------------------------------------------------------------------------------
# NCBI BLAST (blast.ncbi.nlm.nih.gov/Blast.cgi): search page, CMD=Put -> RID and the classic
# "format" page, CMD=Get -> "This page will be automatically updated" until READY -> report.

NCBI_DBS = {
    "nucl": [("nt", "Nucleotide collection (nr/nt)", "nt"),
             ("refseq_rna", "Reference RNA sequences (refseq_rna)", "nt"),
             ("refseq_genomic", "RefSeq Genome Database (refseq_genomic)", "genome"),
             ("est", "Expressed sequence tags (est)", "est")],
    "prot": [("nr", "Non-redundant protein sequences (nr)", "prot"),
             ("refseq_protein", "Reference proteins (refseq_protein)", "prot"),
             ("swissprot", "UniProtKB/Swiss-Prot(swissprot)", "prot"),
             ("pdb", "Protein Data Bank proteins(pdb)", "pdb")],
}
NCBI_ALGOS = {
    "blastn": [("megaBlast", "Highly similar sequences (megablast)"),
               ("discoMegablast", "More dissimilar sequences (discontiguous megablast)"),
               ("blastn", "Somewhat similar sequences (blastn)")],
    "blastp": [("kmerBlastp", "Quick BLASTP (Accelerated protein-protein BLAST)"),
               ("blastp", "blastp (protein-protein BLAST)")],
    "blastx": [("blastx", "blastx (search protein databases using a translated nucleotide query)")],
    "tblastn": [("tblastn", "tblastn (search translated nucleotide databases using a protein query)")],
}
NUMS = [(n, n) for n in ("0", "10", "50", "100", "250")]
NCBI_STYLE = ("body{font-family:Arial,sans-serif;margin:0} #header{background:#20558a;color:#fff;padding:6px 12px}"
              "#header a{color:#fff} .searchsummary{background:#eef} fieldset{margin:8px 12px}")


def ncbi_page(title: str, body: str, head: str = "", app: str = "BLAST", home: str = "/ncbi/Blast.cgi") -> str:
    top = (f'<div id="header"><a href="{offsite("https://www.ncbi.nlm.nih.gov/")}">NCBI</a> &raquo; '
           f'<a href="{home}">{app}</a> <span id="nav"><a href="{home}">Home</a> | '
           f'<a href="{offsite("https://www.ncbi.nlm.nih.gov/guide/all/")}">All Resources</a> | '
           f'<a href="{offsite("https://www.ncbi.nlm.nih.gov/home/about/contact/")}">Help</a></span></div>')
    return page(title, top + body, head, NCBI_STYLE)


def entrez_page(title: str, body: str) -> str:
    return ncbi_page(title, body, app="Entrez", home="/entrez/")


def bankit_page(title: str, body: str) -> str:
    return ncbi_page(title, body, app="BankIt", home="/bankit/")


def orf_page(title: str, body: str) -> str:
    return ncbi_page(title, body, app="ORFfinder", home="/orffinder/")


def ncbi_program(req) -> str:
    p = req.get("PROGRAM", "blastn").lower()
    return p if p in NCBI_ALGOS else "blastn"


@route(r"/ncbi/?")
def ncbi_root(req):
    return redirect("/ncbi/Blast.cgi", 301)


@route(r"/ncbi/Blast\.cgi")
def ncbi_blast(req):
    cmd = req.get("CMD").lower()
    if cmd in ("put", "request"):
        return ncbi_put(req)
    if cmd == "get":
        return ncbi_get(req)
    if req.get("PAGE_TYPE") == "BlastSearch":
        return ncbi_search_page(req)
    links = "".join(f'<li><a href="Blast.cgi?PROGRAM={p}&amp;PAGE_TYPE=BlastSearch&amp;LINK_LOC=blasthome">'
                    f'{label}</a></li>' for p, label in (("blastn", "Nucleotide BLAST"), ("blastp", "Protein BLAST"),
                                                         ("blastx", "blastx"), ("tblastn", "tblastn")))
    return ncbi_page("BLAST: Basic Local Alignment Search Tool", (
        "<h1>Basic Local Alignment Search Tool</h1><p>BLAST finds regions of similarity between biological "
        f"sequences.</p><h2>Web BLAST</h2><ul>{links}</ul><h2>Other tools</h2><ul>"
        '<li><a href="/orffinder/">ORFfinder</a></li><li><a href="/entrez/">Search Entrez</a></li></ul>'))


def ncbi_search_page(req):
    prog = ncbi_program(req)
    kind = "nucl" if NUCL_DB[prog] else "prot"
    algos = "".join(f'<input type="radio" name="BLAST_PROGRAMS" id="{v}" value="{v}"{" checked" if i == 0 else ""}>'
                    f'<label for="{v}">{esc(label)}</label><br>' for i, (v, label) in enumerate(NCBI_ALGOS[prog]))
    what = "Nucleotide" if NUCL_QUERY[prog] else "Protein"
    word = (options([(w, w) for w in ("16", "20", "24", "28", "32", "48", "64")], "28") if prog == "blastn"
            else options([("3", "3"), ("5", "5"), ("6", "6")], "5" if prog == "blastp" else "3"))
    scoring = ('<label for="MATCH_SCORES">Match/Mismatch Scores</label><select name="MATCH_SCORES" id="MATCH_SCORES">'
               + options([("1,-2", "1,-2"), ("1,-3", "1,-3"), ("2,-3", "2,-3")], "1,-2") + "</select>"
               if prog == "blastn" else
               '<label for="MATRIX_NAME">Matrix</label><select name="MATRIX_NAME" id="MATRIX_NAME">'
               + options([(m, m) for m in ("BLOSUM62", "BLOSUM45", "BLOSUM80", "PAM30", "PAM70")], "BLOSUM62")
               + "</select>")
    return ncbi_page(f"{prog.upper()}: {what} BLAST", f"""
<h1>{prog} suite</h1>
<form action="Blast.cgi" method="post" enctype="multipart/form-data" name="searchForm" id="searchForm">
<input type="hidden" name="PROGRAM" value="{prog}"><input type="hidden" name="PAGE_TYPE" value="BlastSearch">
<input type="hidden" name="CMD" value="Put"><input type="hidden" name="SHOW_DEFAULTS" value="on">
<fieldset><legend>Enter Query Sequence</legend>
<label for="seq">Enter accession number(s), gi(s), or FASTA sequence(s)</label>
<textarea name="QUERY" id="seq" rows="6" cols="80"></textarea>
<label for="QUERY_FROM">Query subrange From</label><input name="QUERY_FROM" id="QUERY_FROM" size="10">
<label for="QUERY_TO">To</label><input name="QUERY_TO" id="QUERY_TO" size="10"><br>
<label for="upl">Or, upload file</label><input type="file" name="QUERYFILE" id="upl"><br>
<label for="qtitle">Job Title</label><input name="JOB_TITLE" id="qtitle" size="60">
</fieldset>
<fieldset><legend>Choose Search Set</legend>
<label for="DATABASE">Database</label>
<select name="DATABASE" id="DATABASE">{options([(v, label) for v, label, _ in NCBI_DBS[kind]])}</select><br>
<label for="qorg">Organism</label><input name="EQ_MENU" id="qorg" size="40"> Optional
</fieldset>
<fieldset><legend>Program Selection</legend>Optimize for<br>{algos}</fieldset>
<div class="searchsummary">Search database <b>{NCBI_DBS[kind][0][0]}</b> using <b>{prog}</b>
<input type="submit" name="b1" id="b1" value="BLAST" class="blastbutton"></div>
<fieldset><legend>Algorithm parameters</legend>
<label for="NUM_SEQ">Max target sequences</label><select name="MAX_NUM_SEQ" id="NUM_SEQ">
{options([(n, n) for n in ("10", "50", "100", "250", "500", "1000", "5000")], "100")}</select><br>
<label for="expect">Expect threshold</label><input name="EXPECT" id="expect" value="0.05" size="10"><br>
<label for="wordsize">Word size</label><select name="WORD_SIZE" id="wordsize">{word}</select><br>
{scoring}<br>
<input type="checkbox" name="FILTER" id="FILTER" value="L" checked><label for="FILTER">Low complexity regions</label>
</fieldset></form>""")


def ncbi_put(req):
    prog = ncbi_program(req)
    kind = "nucl" if NUCL_DB[prog] else "prot"
    dbs = {v: db for v, _, db in NCBI_DBS[kind]}
    database = req.get("DATABASE", NCBI_DBS[kind][0][0]).split()[0] if req.get("DATABASE") else NCBI_DBS[kind][0][0]
    if database not in dbs:
        raise InputError(f"Message ID#56 Error: Database '{database}' is not found.")
    try:
        query = parse_query(req.get("QUERY"), req.get("QUERYFILE"))
    except InputError as e:
        raise InputError(f"Message ID#22 Error: Failed to read the Blast query: {e}") from None
    if NUCL_QUERY[prog] != (query.kind == "dna"):
        given, wanted = ("Protein", "nucleotide") if NUCL_QUERY[prog] else ("Nucleotide", "protein")
        raise InputError(f"Message ID#24 Error: Failed to read the Blast query: {given} FASTA provided for "
                         f"{wanted} sequence")
    algo = req.get("BLAST_PROGRAMS") or NCBI_ALGOS[prog][0][0]
    opts = {"evalue": _float(req.get("EXPECT"), 10.0), "filter": bool(req.get("FILTER")),
            "max_target_seqs": int(_float(req.get("MAX_NUM_SEQ"), 100))}
    if prog == "blastn":
        opts["task"] = {"megaBlast": "megablast", "discoMegablast": "dc-megablast"}.get(algo, "blastn")
        word = int(_float(req.get("WORD_SIZE"), 0))
        if opts["task"] == "megablast" and word >= 16 or opts["task"] == "blastn" and 7 <= word <= 64:
            opts["word_size"] = word
    q_from, q_to = req.get("QUERY_FROM").strip(), req.get("QUERY_TO").strip()
    if q_from.isdigit() and q_to.isdigit() and int(q_from) < int(q_to):
        opts["query_loc"] = f"{q_from}-{q_to}"
    rid = "".join(secrets.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(9)) + "013"
    job = submit(prog, dbs[database], query, delay=2.0, **opts)
    with _JOB_LOCK:
        JOBS[rid] = JOBS.pop(job.id)
    job.id, job.options["title"], job.options["dbname"] = rid, req.get("JOB_TITLE") or query.title, database
    return ncbi_page("NCBI Blast:Formatting page", f"""
<form action="Blast.cgi" method="post" name="FormatForm" id="FormatForm">
<input type="hidden" name="CMD" value="Get"><input type="hidden" name="RID" value="{rid}">
<p>Your request has been successfully submitted and put into the Blast Queue.</p>
<p>Query = {esc(job.options["title"])} ({len(query.residues)} letters)</p>
<p>The request ID is <b>{rid}</b></p>
<p>The results are estimated to be ready in 3 seconds but may be done sooner.</p>
<p>Please press "FORMAT!" when you wish to check your results. You may change the formatting options for your result
via the form below and press "FORMAT!" again. You may also request results of a different search by entering any
other valid request ID to see other recent jobs.</p>
<input type="submit" value="FORMAT!"> for <input name="RID2" value="{rid}" size="16" disabled>
<table><tr><td>Show</td><td><select name="FORMAT_OBJECT">{options([("Alignment", "Alignment")])}</select> as
<select name="FORMAT_TYPE">{options([(t, t) for t in ("HTML", "Text", "XML", "Tabular")], "HTML")}</select></td></tr>
<tr><td>Alignment view</td><td><select name="ALIGNMENT_VIEW">{options([
        ("Pairwise", "Pairwise"), ("QueryAnchored", "Query-anchored with dots for identities"),
        ("QueryAnchoredNoIdentities", "Query-anchored with letters for identities"),
        ("FlatQueryAnchored", "Flat query-anchored with dots for identities")], "Pairwise")}</select></td></tr>
<tr><td>Descriptions</td><td><select name="DESCRIPTIONS">{options(NUMS, "100")}</select></td></tr>
<tr><td>Alignments</td><td><select name="ALIGNMENTS">{options(NUMS, "50")}</select></td></tr>
</table></form>
<!--QBlastInfoBegin
    RID = {rid}
    RTOE = 3
QBlastInfoEnd
-->""")


def _float(value: str, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def ncbi_get(req):
    rid = req.get("RID").strip()
    job = JOBS.get(rid)
    if job is None or rid == "":
        return ncbi_page("NCBI Blast", f'<p class="error">Error: Results for RID {esc(rid)} not found</p>'
                         "<!--QBlastInfoBegin\n    Status=UNKNOWN\nQBlastInfoEnd\n-->")
    state = job.state()
    if req.get("FORMAT_OBJECT") == "SearchInfo":
        status = {"RUNNING": "WAITING", "FINISHED": "READY"}.get(state, "FAILED")
        info = "<!--QBlastInfoBegin\n    Status={}\nQBlastInfoEnd\n-->"
        if status != "READY":
            return ncbi_page("NCBI Blast", info.format(status))
        return later(lambda: ncbi_page("NCBI Blast", info.format(
            f"READY\n    ThereAreHits={'yes' if hits_of(job) else 'no'}")))
    if state == "ERROR":
        return ncbi_page("NCBI Blast", f'<p class="error">Error: {esc(job.error)}</p>'
                         "<!--QBlastInfoBegin\n    Status=FAILED\nQBlastInfoEnd\n-->")
    ftype = req.get("FORMAT_TYPE", "HTML")
    params = {k: req.get(k) for k in ("FORMAT_TYPE", "ALIGNMENT_VIEW", "DESCRIPTIONS", "ALIGNMENTS") if req.get(k)}
    if state == "RUNNING":
        again = "Blast.cgi?" + urlencode({"CMD": "Get", "RID": rid, **params})
        since = int(time.time() - job.submitted)
        return ncbi_page(f"NCBI Blast:{job.options.get('title', '')}", f"""
<table id="statInfo"><tr><td>Job Title</td><td>{esc(job.options.get("title", ""))}</td></tr>
<tr><td>Request ID</td><td><b>{rid}</b></td></tr><tr><td>Status</td><td>Searching</td></tr>
<tr><td>Submitted at</td><td>{time.ctime(job.submitted)}</td></tr><tr><td>Current time</td><td>{time.ctime()}</td></tr>
<tr><td>Time since submission</td><td>00:00:{since:02d}</td></tr></table>
<p class="WAITING">This page will be automatically updated in <b>2</b> seconds</p>
<form action="Blast.cgi" method="get"><input type="hidden" name="CMD" value="Get">
<input type="hidden" name="RID" value="{rid}"><input type="submit" value="Update"></form>
<!--QBlastInfoBegin
    Status=WAITING
QBlastInfoEnd
-->""", head=f'<meta http-equiv="refresh" content="2; URL={esc(again)}">')
    view = {"QueryAnchored": "1", "QueryAnchoredNoIdentities": "2", "FlatQueryAnchored": "3"}.get(
        req.get("ALIGNMENT_VIEW"), "0")
    desc, align = int(_float(req.get("DESCRIPTIONS"), 100)), int(_float(req.get("ALIGNMENTS"), 50))
    if ftype == "Text":
        return later(lambda: text(report(job, view, False, desc, align)))
    if ftype == "XML":
        return later(lambda: text(report(job, "5"), "text/xml; charset=utf-8"))
    if ftype == "Tabular":
        return later(lambda: text(report(job, "7")))
    dl = "Blast.cgi?" + urlencode({"RID": rid, "CMD": "Get", "FORMAT_TYPE": "Text"})
    edit = f"Blast.cgi?PROGRAM={job.program}&amp;PAGE_TYPE=BlastSearch"

    def render():
        body = pre_of(report(job, view, True, desc, align))
        return ncbi_page(f"NCBI Blast:{job.options.get('title', '')}", f"""
<div id="jobInfo"><a href="{edit}">Edit and Resubmit</a> | <a href="{dl}">Download</a> (Text)
<table><tr><td>Job Title</td><td>{esc(job.options.get("title", ""))}</td></tr><tr><td>RID</td><td>{rid}</td></tr>
<tr><td>Program</td><td>{job.program.upper()}</td></tr><tr><td>Database</td><td>{esc(job.options["dbname"])}</td></tr>
</table></div>
<PRE>{body}</PRE>""")
    return later(render)


# ---------------------------------------------------------------------------------------------
# EBI Job Dispatcher, NCBI BLAST+ (www.ebi.ac.uk/Tools/sss/ncbiblast/): four steps on one form,
# toolform.ebi -> toolresult.ebi?jobId=ncbiblast-R... polled until FINISHED, then result tabs;
# the REST interface (run, status, result/<id>/out) answers the same jobs.

EBI_DBS = {
    "nucl": [("em_rel", "ENA Sequence Release", "nt"), ("em_rel_std", "ENA Sequence Standard", "nt"),
             ("em_rel_est", "ENA Sequence EST", "est"), ("em_wgs", "ENA Whole Genome Shotgun", "genome")],
    "prot": [("uniprotkb_swissprot", "UniProtKB/Swiss-Prot", "prot"), ("uniprotkb", "UniProtKB", "prot"),
             ("pdb", "Protein Structure Sequences (PDB)", "pdb")],
}
EBI_PROGRAMS = {"nucl": ["blastn", "tblastn", "tblastx"], "prot": ["blastp", "blastx"]}


def ebi_page(title: str, body: str, head: str = "") -> str:
    return page(title, '<header id="masthead"><a href="/ebi/Tools/sss/ncbiblast/">EMBL-EBI</a> &gt; '
                       f'<a href="{offsite("https://www.ebi.ac.uk/Tools/")}">Job Dispatcher</a> &gt; '
                       f"Sequence Similarity Searching &gt; NCBI BLAST+</header>\n{body}", head)


@route(r"/ebi/Tools/sss/ncbiblast/(nucleotide\.html)?")
def ebi_form(req, nucleotide):
    kind = "nucl" if nucleotide else "prot"
    dbs = "".join(f'<label><input type="checkbox" name="database" value="{v}"{" checked" if i == 0 else ""}> '
                  f"{esc(label)}</label><br>" for i, (v, label, _) in enumerate(EBI_DBS[kind]))
    progs = options([(p, p.upper()) for p in EBI_PROGRAMS[kind]])
    stype = options([("protein", "PROTEIN"), ("dna", "DNA"), ("rna", "RNA")], "dna" if nucleotide else "protein")
    return ebi_page("NCBI BLAST+ &lt; Job Dispatcher &lt; EMBL-EBI", f"""
<h1>NCBI BLAST+ {'Nucleotide' if nucleotide else 'Protein'}</h1>
<p>This tool provides access to the NCBI BLAST+ suite of programs. For a protein query use the
<a href="/ebi/Tools/sss/ncbiblast/">protein databases</a>, for DNA the
<a href="/ebi/Tools/sss/ncbiblast/nucleotide.html">nucleotide databases</a>.</p>
<form id="jd_toolSubmissionForm" action="/ebi/Tools/services/web_ncbiblast/toolform.ebi" method="post"
 enctype="multipart/form-data"><input type="hidden" name="tool" value="ncbiblast">
<input type="hidden" name="context" value="{'nucleotide' if nucleotide else 'protein'}">
<fieldset><legend>STEP 1 - Select your databases</legend>{dbs}</fieldset>
<fieldset><legend>STEP 2 - Enter your input sequence</legend>
<textarea name="sequence" id="sequence" rows="10" cols="80"></textarea><br>
Or, upload a file: <input type="file" name="upfile"></fieldset>
<fieldset><legend>STEP 3 - Set your Parameters</legend>
PROGRAM <select name="program">{progs}</select> SEQUENCE TYPE <select name="stype">{stype}</select><br>
EXP. THR. <select name="exp">{options([(e, e) for e in ("1e-10", "1e-5", "1e-3", "0.1", "1", "10", "100")], "10")}
</select> FILTER <select name="filter">{options([("F", "false"), ("T", "true")], "T" if nucleotide else "F")}</select>
ALIGNMENTS <select name="alignments">{options([(n, n) for n in ("5", "20", "50", "100")], "50")}</select>
SCORES <select name="scores">{options([(n, n) for n in ("5", "20", "50", "100")], "50")}</select></fieldset>
<fieldset><legend>STEP 4 - Submit your job</legend>
<label><input type="checkbox" name="notification"> Be notified by email</label>
<input type="text" name="email" placeholder="Email"> Title <input name="title">
<input type="submit" value="Submit"></fieldset></form>""")


def ebi_submit(req) -> Job:
    kind = "prot" if req.get("program", "blastn") in ("blastp", "blastx") else "nucl"
    known = {v: db for v, _, db in EBI_DBS[kind]}
    chosen = [known[d] for d in req.getlist("database") if d in known]
    if not chosen:
        raise InputError("Please select at least one database valid for the program "
                         f"{req.get('program', 'blastn').upper()}.")
    query = parse_query(req.get("sequence"), req.get("upfile"))
    jid = f"ncbiblast-R{time.strftime('%Y%m%d-%H%M%S')}-{secrets.randbelow(9000) + 1000}-" \
          f"{secrets.randbelow(90000000) + 10000000}-p1m"
    job = submit(req.get("program", "blastn"), " ".join(dict.fromkeys(chosen)), query, delay=1.5,
                 evalue=_float(req.get("exp"), 10), filter=req.get("filter") == "T", task="blastn",
                 max_target_seqs=int(_float(req.get("scores"), 50)))
    with _JOB_LOCK:
        JOBS[jid] = JOBS.pop(job.id)
    job.id = jid
    return job


@route(r"/ebi/Tools/services/web_ncbiblast/toolform\.ebi")
def ebi_toolform(req):
    if req.method != "POST":
        return redirect("/ebi/Tools/sss/ncbiblast/nucleotide.html")
    return redirect("/ebi/Tools/services/web/toolresult.ebi?jobId=" + ebi_submit(req).id, 302)


@route(r"/ebi/Tools/services/web/toolresult\.ebi")
def ebi_result(req):
    jid = req.get("jobId")
    job = JOBS.get(jid) if jid.startswith("ncbiblast-") else None
    if job is None:
        return ebi_page("Job Dispatcher", f"<h2>Job not found</h2><p>The job {esc(jid)} does not exist or has "
                                          "expired.</p>")
    state = job.state()
    if state != "FINISHED":
        return ebi_page(f"Results for job {jid}", f"<h2>Results for job {esc(jid)}</h2>" + (
            f'<p class="error">Your job {esc(jid)} FAILED: {esc(job.error)}</p>' if state == "ERROR" else
            '<p>Your job is currently <b>RUNNING</b>. This page will refresh every 2 seconds.</p>'),
            head='<meta http-equiv="refresh" content="2">' if state == "RUNNING" else "")
    base = f"/ebi/Tools/services/web/toolresult.ebi?jobId={jid}"
    rest = f"/ebi/Tools/services/rest/ncbiblast/result/{jid}"
    tabs = "".join(f'<li><a href="{base}&amp;analysis={a}">{t}</a></li>' for a, t in (
        ("toolsummary", "Tool Output"), ("visual", "Visual Output"), ("params", "Submission Details"),
        ("files", "Result Files")))
    head = f"<h2>Results for job {esc(jid)}</h2><ul class='tabs'>{tabs}</ul>"
    analysis = req.get("analysis", "toolsummary")
    if analysis == "params":
        return ebi_page("Submission Details", head + f"<table><tr><td>Program</td><td>{job.program}</td></tr>"
                        f"<tr><td>Database</td><td>{esc(job.db)}</td></tr><tr><td>Sequence</td><td><pre>"
                        f"{esc(job.query.fasta)}</pre></td></tr></table>")
    if analysis == "files":
        return ebi_page("Result Files", head + f'<table><tr><td><a href="{rest}/out">Tool Output</a></td>'
                        f'<td>out</td></tr><tr><td><a href="{rest}/xml">XML output</a></td><td>xml</td></tr>'
                        f'<tr><td><a href="{rest}/sequence">Input Sequence</a></td><td>sequence</td></tr></table>')
    if analysis == "visual":
        return ebi_page("Visual Output", head + "<p>Visual output requires JavaScript.</p>")
    return later(lambda: ebi_page(f"Results for job {jid}", head + f'<pre id="alignmentsContent">'
                                  f"{esc(report(job, '0', False, 50, 50))}</pre>"))


@route(r"/ebi/Tools/services/rest/ncbiblast/(run|status|result)(?:/([\w-]+))?(?:/(\w+))?/?")
def ebi_rest(req, what, jid, rtype):
    if what == "run":
        if req.method != "POST":
            return Resp("Method not allowed", 405, "text/plain")
        return text(ebi_submit(req).id)
    job = JOBS.get(jid or "")
    if job is None:
        return Resp("Job not found", 400, "text/plain")
    if what == "status":
        return text({"RUNNING": "RUNNING", "FINISHED": "FINISHED"}.get(job.state(), "FAILURE"))
    if job.state() != "FINISHED" or rtype not in ("out", "xml", "sequence"):
        return Resp("Result not available", 400, "text/plain")
    if rtype == "sequence":
        return text(job.query.fasta)
    return later(lambda: text(report(job, "5"), "application/xml") if rtype == "xml" else text(report(job, "0")))


# ---------------------------------------------------------------------------------------------
# SequenceServer (sequenceserver.com, a lab's own BLAST): one page, databases[] checkboxes keyed
# by hash, "advanced" BLAST options; POST / -> 303 /<job id>, which shows SequenceServer's own
# rendering of the hits (Score: / E value: / Identity:) and download links.

SS_DBS = [("nt", "Sequences from GenBank (nt subset)"), ("genome", "HX-R1 genome assembly (chromosomes)"),
          ("est", "HXL EST library"), ("prot", "HX-R1 annotated proteins"), ("pdb", "PDB chains")]


def ss_hash(db: str) -> str:
    import hashlib
    return hashlib.md5(f"/db/{db}.fa".encode()).hexdigest()


@route(r"/sequenceserver/")
def ss_home(req):
    if req.method == "POST":
        return ss_post(req)
    cols = ""
    for kind, title in (("nucl", "Nucleotide databases"), ("prot", "Protein databases")):
        boxes = "".join(f'<li><label><input type="checkbox" name="databases[]" value="{ss_hash(d)}" '
                        f'data-type="{"nucleotide" if kind == "nucl" else "protein"}"> {esc(t)}</label></li>'
                        for d, t in SS_DBS if DBTYPE[d] == kind)
        cols += f'<div class="databases {kind}"><h4>{title}</h4><ul>{boxes}</ul></div>'
    return page("SequenceServer: Custom BLAST Server", f"""
<nav><a href="/sequenceserver/">SequenceServer</a> <a href="{offsite("https://sequenceserver.com/")}">Help</a></nav>
<form id="blast" method="post" action="/sequenceserver/">
<textarea id="sequence" name="sequence" rows="10" cols="90" spellcheck="false" autofocus
 placeholder="Paste query sequence(s) or drag file containing query sequence(s) in FASTA format here ..."></textarea>
{cols}
<input type="text" name="advanced" id="advanced" size="60"
 placeholder="eg: -evalue 1.0e-5 -num_alignments 100" title="View, and enter advanced parameters.">
<button type="submit" id="method" name="method" value="">BLAST</button>
</form><p>Please cite: Priyam, Woodcroft, Rai et al. 2019 SequenceServer.</p>""")


def ss_post(req):
    by_hash = {ss_hash(d): d for d, _ in SS_DBS}
    dbs = [by_hash[h] for h in req.getlist("databases[]") if h in by_hash]
    if not dbs:
        raise InputError("No database selected. Please select at least one database.")
    if len({DBTYPE[d] for d in dbs}) > 1:
        raise InputError("Databases of different type selected. Please select only nucleotide or only protein "
                         "databases.")
    query = parse_query(req.get("sequence"))
    nucl_db = DBTYPE[dbs[0]] == "nucl"
    method = req.get("method") or {(True, True): "blastn", (False, False): "blastp", (True, False): "blastx",
                                   (False, True): "tblastn"}[(query.kind == "dna", nucl_db)]
    opts = {}
    adv = req.get("advanced").split()
    for flag, value in zip(adv, adv[1:], strict=False):
        if flag == "-evalue":
            opts["evalue"] = _float(value, 10)
        elif flag == "-task" and value in ("blastn", "megablast", "dc-megablast", "blastn-short"):
            opts["task"] = value
        elif flag in ("-max_target_seqs", "-num_alignments"):
            opts["max_target_seqs"] = int(_float(value, 100))
    job = submit(method, " ".join(dbs), query, delay=1.0, **opts)
    return redirect(f"/sequenceserver/{job.id}")


@route(r"/sequenceserver/([0-9a-f]{12})")
def ss_job(req, jid):
    job = JOBS.get(jid)
    if job is None:
        return Resp(page("Not found", "<h1>Job not found</h1>"), 404)
    if job.state() == "RUNNING":
        return page("SequenceServer", "<p>Please wait while BLAST is running ... This page will refresh.</p>",
                    head='<meta http-equiv="refresh" content="1">')
    if job.state() == "ERROR":
        return page("SequenceServer", f'<h2>BLAST failed</h2><pre class="error">{esc(job.error)}</pre>')

    def render():
        hits = hits_of(job)
        rows, details = "", ""
        for n, h in enumerate(hits, 1):
            best = h.hsps[0]
            ident = 100 * int(best["identity"]) / int(best["align-len"])
            rows += (f'<tr><td>{n}</td><td><a href="#Query_1_hit_{n}">{esc(h.id)}</a> {esc(h.title)}</td>'
                     f'<td>{float(best["bit-score"]):.0f}</td><td>{float(best["evalue"]):.2g}</td>'
                     f"<td>{ident:.2f}</td></tr>")
            hsps = ""
            for k, hsp in enumerate(h.hsps, 1):
                al = int(hsp["align-len"])
                strand = "" if job.program != "blastn" else (
                    ", Strand: Plus/" + ("Minus" if int(hsp["hit-to"]) < int(hsp["hit-from"]) else "Plus"))
                hsps += (f'<pre class="hsp">{k}. Score: {float(hsp["bit-score"]):.1f} bits ({hsp["score"]}), '
                         f'E value: {float(hsp["evalue"]):.1e}, Identity: {hsp["identity"]}/{al} '
                         f'({100 * int(hsp["identity"]) // al}%), Gaps: {hsp.get("gaps", "0")}/{al}{strand}\n\n'
                         f"{esc(aligned_lines(hsp, 'Query', 'Subject', 60, job.program == 'blastn'))}</pre>")
            details += (f'<div class="hit" id="Query_1_hit_{n}"><h4>{n}. {esc(h.id)} {esc(h.title)}</h4>'
                        f"<p>Length: {h.length}</p>{hsps}</div>")
        if not hits:
            details = "<p><strong>****** No hits found ******</strong></p>"
        dl = "".join(f'<li><a href="/sequenceserver/download/{jid}.{t}">{label}</a></li>' for t, label in (
            ("std_tsv", "Standard tabular report"), ("full_tsv", "Full tabular report"), ("xml", "Full XML report"),
            ("pairwise", "Full Text report")))
        return page("SequenceServer: BLAST results", f"""
<nav><a href="/sequenceserver/">SequenceServer</a></nav><div id="results"><div class="sidebar"><h4>Download</h4>
<ul>{dl}</ul></div><div class="resultn" id="Query_1"><h3>Query= {esc(job.query.title)}</h3>
<p>length={len(job.query.residues)} ({job.program}, {len(hits)} hits)</p>
<table class="table hits"><tr><th>#</th><th>Similar sequences</th><th>Total score</th><th>E value</th>
<th>Identity (%)</th></tr>{rows}</table>{details}</div></div>""")
    return later(render)


@route(r"/sequenceserver/download/([0-9a-f]{12})\.(std_tsv|full_tsv|xml|pairwise)")
def ss_download(req, jid, kind):
    job = JOBS.get(jid)
    if job is None or job.state() != "FINISHED":
        return Resp("Not found", 404, "text/plain")
    fmt = {"std_tsv": "6", "full_tsv": "7", "xml": "5", "pairwise": "0"}[kind]
    return later(lambda: text(report(job, fmt)))


# ---------------------------------------------------------------------------------------------
# Genome databases. FlyBase's classic BLAST page (flybase.org/blast/): program, database by
# species and kind, one POST, the BLAST+ HTML report in the answer. WormBase's BLAST/BLAT
# (wormbase.org/tools/blast_blat): query type, BLAST or BLAT, application, E-value, a hit
# table and the full text report.

def blast_now(program: str, db: str, query: Query, **opts):
    """A Deferred of the finished job (the search and the wait run in a thread)."""
    job = submit(program, db, query, **opts)
    return later(wait, job)


FLY_DBS = [("dmel-all-chromosome", "D. melanogaster Genome (Release 6)", "genome"),
           ("dmel-all-transcript", "D. melanogaster Transcripts (all)", "nt"),
           ("dmel-all-translation", "D. melanogaster Annotated Proteins", "prot"),
           ("est", "Drosophila EST sequences", "est")]


@route(r"/flybase/blast/?")
def flybase(req):
    if req.method == "POST":
        return flybase_run(req)
    return page("FlyBase BLAST", f"""<div id="fb_header"><a href="/flybase/blast/">FlyBase</a> | Tools | BLAST
 <a href="{offsite("https://flybase.org/")}">flybase.org</a></div><h1>BLAST</h1>
<form method="post" action="/flybase/blast/" name="blastform">
<table><tr><td>Program</td><td><select name="program">{options([(p, p) for p in NUCL_QUERY], "blastn")}</select>
</td></tr><tr><td>Database</td><td><select name="database">
{options([(v, label) for v, label, _ in FLY_DBS], "dmel-all-chromosome")}</select></td></tr>
<tr><td>Input sequence (FASTA or plain)</td><td><textarea name="sequence" rows="8" cols="80"></textarea></td></tr>
<tr><td>E-value</td><td><select name="expect">{options([(e, e) for e in ("1e-30", "1e-10", "0.001", "1", "10")],
                                                       "10")}</select>
<label><input type="checkbox" name="filter" value="1" checked> Filter low complexity</label></td></tr>
</table><input type="submit" value="BLAST"> <input type="reset" value="Clear"></form>""")


def flybase_run(req):
    dbs = {v: (label, db) for v, label, db in FLY_DBS}
    label, db = dbs.get(req.get("database"), dbs["dmel-all-chromosome"])
    query, program = parse_query(req.get("sequence")), req.get("program", "blastn")
    d = blast_now(program, db, query, evalue=_float(req.get("expect"), 10), filter=bool(req.get("filter")))

    def render(job):
        if job.status != "FINISHED":
            raise InputError(job.error or "BLAST did not finish.")
        return page("FlyBase BLAST Results", f"""<div id="fb_header"><a href="/flybase/blast/">FlyBase</a></div>
<h1>BLAST Results</h1><p>Program: {program} &middot; Database: {esc(label)}
 &middot; <a href="/flybase/blast/">New search</a></p><PRE>{pre_of(report(job, "0", True))}</PRE>""")
    return d.addCallback(lambda job: later(render, job))


WORM_DBS = [("c_elegans_PRJNA13758_genomic", "C. elegans (PRJNA13758) - genome", "genome"),
            ("c_elegans_PRJNA13758_est", "C. elegans - ESTs", "est"),
            ("c_elegans_PRJNA13758_transcripts", "C. elegans - transcripts", "nt"),
            ("c_elegans_PRJNA13758_protein", "C. elegans - proteins", "prot")]


@route(r"/wormbase/tools/blast_blat/?")
def wormbase(req):
    radios = ('<input type="radio" name="query_type" value="nucl" checked>Nucleotide '
              '<input type="radio" name="query_type" value="prot">Protein')
    return page("BLAST/BLAT -- WormBase", f"""<div id="header"><a href="/wormbase/tools/blast_blat">WormBase</a>
 <a href="{offsite("https://wormbase.org/")}">wormbase.org</a></div><h2>BLAST/BLAT Search</h2>
<form method="post" action="/wormbase/tools/blast_blat/run" enctype="multipart/form-data">
<p>Query sequence:<br><textarea name="query_sequence" rows="8" cols="80"></textarea></p>
<p>Query type: {radios}</p><p>Search type: <input type="radio" name="search_type" value="blast" checked>BLAST
<input type="radio" name="search_type" value="blat">BLAT</p>
<p>BLAST application: <select name="blast_app">{options([(p, p) for p in NUCL_QUERY], "blastn")}</select>
E-value threshold: <select name="blast_e_value">{options([(e, e) for e in ("1E+1", "1E+0", "1E-2", "1E-4",
                                                                           "1E-8", "1E-16")], "1E+0")}</select></p>
<p>Database: <select name="database">{options([(v, label) for v, label, _ in WORM_DBS])}</select></p>
<p><input type="checkbox" name="process_query" value="1" checked> Filter low complexity sequences</p>
<input type="submit" name="submit" value="Submit"> <input type="reset" value="Reset"></form>""")


@route(r"/wormbase/tools/blast_blat/run")
def wormbase_run(req):
    if req.get("search_type") == "blat":
        raise InputError("BLAT server is not available at this time, please use BLAST.")
    dbs = {v: db for v, _, db in WORM_DBS}
    query = parse_query(req.get("query_sequence"))
    if (query.kind == "dna") != (req.get("query_type", "nucl") == "nucl"):
        raise InputError("The query type does not match the sequence entered.")
    program = req.get("blast_app", "blastn")
    d = blast_now(program, dbs.get(req.get("database"), "genome"), query, task="blastn",
                  evalue=_float(req.get("blast_e_value"), 1.0), filter=bool(req.get("process_query")))

    def render(job):
        if job.status != "FINISHED":
            raise InputError(job.error or "BLAST did not finish.")
        rows = "".join(f"<tr><td>{esc(h.id)}</td><td>{esc(h.title)}</td><td>{h.hsps[0]['bit-score'][:6]}</td>"
                       f"<td>{h.hsps[0]['evalue']}</td><td>{h.hsps[0]['hit-from']}..{h.hsps[0]['hit-to']}</td></tr>"
                       for h in hits_of(job))
        return page("BLAST/BLAT results -- WormBase", f"""<h2>BLAST results</h2>
<table class="hits"><tr><th>Hit</th><th>Description</th><th>Score</th><th>E-value</th><th>Location</th></tr>
{rows or "<tr><td colspan='5'>No hits</td></tr>"}</table>
<h3>Full BLAST report</h3><pre>{esc(report(job))}</pre><p><a href="/wormbase/tools/blast_blat">New search</a></p>""")
    return d.addCallback(lambda job: later(render, job))


# ---------------------------------------------------------------------------------------------
# ViroBLAST (viroblast.php -> blastresult.php): databases as patientIDarray[] checkboxes; the
# job page refreshes until the result (hit summary and the HTML report) is there.

VIRO_DBS = [("hiv_nt", "HIV/SIV nucleotide sequences", "nt"), ("ref_genomes", "Viral reference genomes", "genome"),
            ("env_reads", "Environmental sample reads", "est"), ("viral_prot", "Viral proteins", "prot")]


@route(r"/viroblast/(?:viroblast\.php)?")
def viroblast(req):
    boxes = "".join(f'<input type="checkbox" name="patientIDarray[]" value="{v}"{" checked" if i == 0 else ""}>'
                    f"{esc(label)}<br>" for i, (v, label, _) in enumerate(VIRO_DBS))
    return page("ViroBLAST", f"""<h2>ViroBLAST</h2>
<form method="post" action="blastresult.php" enctype="multipart/form-data" name="blastForm">
<p>Enter query sequences here in Fasta format<br><textarea name="querySeq" rows="8" cols="80"></textarea></p>
<p>Or upload sequence fasta file: <input type="file" name="queryfile"></p>
<p>Program <select name="program">{options([(p, p) for p in NUCL_QUERY], "blastn")}</select>
Expect <select name="expect">{options([(e, e) for e in ("0.001", "0.01", "0.1", "1", "10", "100")], "10")}</select></p>
<p>Database(s):<br>{boxes}</p><input type="hidden" name="blast_flag" value="1">
<input type="submit" value="Basic Search"> <input type="reset" value="Reset">
<a href="{offsite("https://indra.mullins.microbiol.washington.edu/viroblast/")}">About ViroBLAST</a></form>""")


@route(r"/viroblast/blastresult\.php")
def viroblast_result(req):
    if req.method == "POST":
        dbs = {v: db for v, _, db in VIRO_DBS}
        chosen = [dbs[v] for v in req.getlist("patientIDarray[]") if v in dbs]
        if not chosen:
            raise InputError("Please choose at least one database.")
        query = parse_query(req.get("querySeq"), req.get("queryfile"))
        job = submit(req.get("program", "blastn"), " ".join(chosen), query, delay=1.0, task="blastn",
                     evalue=_float(req.get("expect"), 10))
        jid = str(int(time.time() * 1000))[-10:] + str(secrets.randbelow(90) + 10)
        with _JOB_LOCK:
            JOBS[jid] = JOBS.pop(job.id)
        job.id = jid
    else:
        jid = req.get("jobid")
        job = JOBS.get(jid) if jid.isdigit() else None
        if job is None:
            raise InputError("No such job.")
    if job.state() == "RUNNING":
        return page("ViroBLAST", f"<p>Your job (ID: {jid}) is running. This page will refresh automatically; "
                    f'or check your <a href="blastresult.php?jobid={jid}">result page</a> later.</p>',
                    head=f'<meta http-equiv="refresh" content="1; url=blastresult.php?jobid={jid}">')
    if job.state() == "ERROR":
        raise InputError(job.error)

    def render():
        rows = "".join(f'<tr><td><input type="checkbox" name="dldseq[]" value="{esc(h.id)}"></td><td>'
                       f'<a href="#{esc(h.id)}">{esc(h.id)}</a></td><td>{esc(h.title)}</td>'
                       f"<td>{h.hsps[0]['bit-score'][:6]}</td><td>{h.hsps[0]['evalue']}</td></tr>"
                       for h in hits_of(job))
        return page("ViroBLAST result", f"""<h2>ViroBLAST result (job ID {jid})</h2>
<form method="post" action="download.php"><input type="hidden" name="jobid" value="{jid}">
<table><tr><th></th><th>Sequences producing significant alignments</th><th>Description</th><th>Score</th>
<th>E value</th></tr>{rows}</table><input type="submit" value="Download selected sequences"></form>
<p><a href="data/{jid}.blast">Download the BLAST output</a></p><PRE>{pre_of(report(job, "0", True))}</PRE>""")
    return later(render)


@route(r"/viroblast/data/(\d+)\.blast")
def viroblast_data(req, jid):
    job = JOBS.get(jid)
    if job is None or job.state() != "FINISHED":
        return Resp("Not Found", 404, "text/plain")
    return later(lambda: text(report(job)))


# ---------------------------------------------------------------------------------------------
# wwwblast, NCBI's stand-alone web BLAST of the 2000s (blast.html -> blast.cgi): upper-case
# fields, DATALIB, one multipart POST, the report in a bare <PRE>.

WWW_DBS = [("nt", "nt"), ("est", "est"), ("genome", "genome"), ("swissprot", "prot"), ("pdbaa", "pdb")]


@route(r"/wwwblast/(?:blast\.html)?")
def wwwblast(req):
    return f"""<HTML><HEAD><TITLE>BLAST Search</TITLE></HEAD><BODY BGCOLOR="#FFFFFF" LINK="#0000FF">
<FORM ACTION="blast.cgi" METHOD=POST NAME="MainBlastForm" ENCTYPE="multipart/form-data">
<B>Choose program to use and database to search:</B><P>
Program <select name="PROGRAM">{options([(p, p) for p in NUCL_QUERY], "blastn")}</select>
Database <select name="DATALIB">{options([(v, v) for v, _ in WWW_DBS])}</select><P>
Enter here your input data as <select name="INPUT_TYPE"><option>Sequence in FASTA format
<option>Accession or GI</select><BR><textarea name="SEQUENCE" rows=6 cols=60></textarea><BR>
Or load it from disk <INPUT TYPE="file" NAME="SEQFILE"><P>
<INPUT TYPE="checkbox" NAME="UNGAPPED_ALIGNMENT" VALUE="is_set"> Perform ungapped alignment<BR>
Expect <select name="EXPECT">{options([(e, e) for e in ("0.0001", "0.01", "1", "10", "100", "1000")], "10")}
</select> Filter <INPUT TYPE="checkbox" VALUE="L" NAME="FILTER" CHECKED> Low complexity<BR>
<INPUT TYPE="checkbox" NAME="OVERVIEW" CHECKED> Graphical Overview
Descriptions <select name="DESCRIPTIONS">{options(NUMS, "100")}</select>
Alignments <select name="ALIGNMENTS">{options(NUMS, "50")}</select><P>
<INPUT TYPE="button" VALUE="Clear sequence" onClick="MainBlastForm.SEQUENCE.value='';MainBlastForm.SEQFILE.value='';">
<INPUT TYPE="submit" VALUE="Search"></FORM></BODY></HTML>"""


@route(r"/wwwblast/blast\.cgi")
def wwwblast_cgi(req):
    dbs = dict(WWW_DBS)
    if req.get("DATALIB") not in dbs:
        raise InputError("No database specified")
    query = parse_query(req.get("SEQUENCE"), req.get("SEQFILE"))
    d = blast_now(req.get("PROGRAM", "blastn"), dbs[req.get("DATALIB")], query, task="blastn",
                  evalue=_float(req.get("EXPECT"), 10), filter=bool(req.get("FILTER")))

    def render(job):
        if job.status != "FINISHED":
            raise InputError(job.error or "BLAST did not finish.")
        body = pre_of(report(job, "0", True, int(_float(req.get("DESCRIPTIONS"), 100)),
                             int(_float(req.get("ALIGNMENTS"), 50))))
        return ('<HTML>\n<TITLE>BLAST Search Results</TITLE>\n<BODY BGCOLOR="#FFFFFF" LINK="#0000FF" '
                f'VLINK="#660099" ALINK="#660099">\n<PRE>{body}</PRE>\n</BODY>\n</HTML>\n')
    return d.addCallback(lambda job: later(render, job))


# ---------------------------------------------------------------------------------------------
# UniProt BLAST (uniprot.org/blast/, the 2010s site): protein databases only; a DNA query is
# searched with blastx. POST -> 303 /uniprot/blast/uniprot/B<date><id>, refreshed until done,
# then UniProt's hit table and its own alignment view.

UNIPROT_DBS = [("uniprotkb_refprotswissprot", "UniProtKB reference proteomes + Swiss-Prot", "prot"),
               ("uniprotkb", "UniProtKB", "prot"), ("uniprotkb_swissprot", "UniProtKB/Swiss-Prot", "prot"),
               ("pdb", "PDB", "pdb")]


@route(r"/uniprot/blast/?")
def uniprot(req):
    if req.method == "POST":
        dbs = {v: db for v, _, db in UNIPROT_DBS}
        query = parse_query(req.get("query"))
        job = submit("blastx" if query.kind == "dna" else "blastp", dbs.get(req.get("dataset"), "prot"), query,
                     prefix="B" + time.strftime("%Y%m%d"), delay=1.5, evalue=_float(req.get("threshold"), 10),
                     filter=req.get("filtering") == "true", max_target_seqs=int(_float(req.get("numal"), 250)))
        return redirect(f"/uniprot/blast/uniprot/{job.id}")
    sel = [("threshold", "E-Threshold", [(e, e) for e in ("0.0001", "0.001", "0.01", "0.1", "1", "10", "100")], "10"),
           ("matrix", "Matrix", [(m, m) for m in ("auto", "BLOSUM-45", "BLOSUM-62", "BLOSUM-80", "PAM-70")], "auto"),
           ("filtering", "Filtering", [("false", "None"), ("true", "Filter low complexity regions")], "false"),
           ("gapped", "Gapped", [("true", "yes"), ("false", "no")], "true"),
           ("numal", "Hits", [(n, n) for n in ("50", "100", "250", "500", "1000")], "250")]
    selects = "".join(f'<label>{label} <select name="{n}">{options(o, d)}</select></label> ' for n, label, o, d in sel)
    return page("BLAST - UniProt", f"""<header><a href="/uniprot/blast/">UniProt</a>
 <a href="{offsite("https://www.uniprot.org/help/sequence-searches")}">Help</a></header><h1>BLAST</h1>
<form method="post" action="/uniprot/blast/" id="blast-form">
<textarea name="query" rows="8" cols="90" placeholder="Protein or nucleotide sequence(s) in FASTA format."></textarea>
<p><label>Target database <select name="dataset">{options([(v, t) for v, t, _ in UNIPROT_DBS])}</select></label>
<label>Restrict by taxonomy <input name="taxonomy" placeholder="e.g. Homo sapiens"></label></p>
<p>{selects}</p><button type="submit">Run BLAST</button></form>""")


@route(r"/uniprot/blast/uniprot/(B\d{8}[0-9a-f]{12})")
def uniprot_job(req, jid):
    job = JOBS.get(jid)
    if job is None:
        return Resp(page("Not found", "<h1>Job not found</h1>"), 404)
    if job.state() == "RUNNING":
        return page("BLAST - UniProt", f"<h1>BLAST job {jid}</h1><p>Your BLAST job is running. This page will be "
                    "updated automatically.</p>", head='<meta http-equiv="refresh" content="2">')
    if job.state() == "ERROR":
        raise InputError(job.error)

    def render():
        rows, aligns = "", ""
        for h in hits_of(job):
            acc, name = (h.id.split("|") + ["", ""])[1:3]
            organism = re.search(r"OS=(.*?) OX=", h.title)
            hsp = h.hsps[0]
            ident = 100 * int(hsp["identity"]) / int(hsp["align-len"])
            rows += (f'<tr><td><a href="#{acc}">{esc(acc)}</a></td><td>{esc(name)}</td>'
                     f'<td>{esc(h.title.split(" OS=")[0])}</td><td>{esc(organism.group(1) if organism else "")}</td>'
                     f"<td>{h.length}</td><td>{ident:.1f}%</td><td>{hsp['score']}</td><td>{hsp['evalue']}</td></tr>")
            aligns += (f'<div class="alignment" id="{esc(acc)}"><h3>{esc(acc)} {esc(name)}</h3>'
                       f"<p>Identity {ident:.1f}%, Score {hsp['score']}, E-value {hsp['evalue']}</p>"
                       f"<pre>{esc(aligned_lines(hsp, 'Query_1', acc, 60, False))}</pre></div>")
        note = " (nucleotide query: blastx was used)" if job.program == "blastx" else ""
        return page(f"BLAST results {jid} - UniProt", f"""<h1>BLAST results</h1>
<p>Program: {job.program}{note}. Job {jid}. <a href="/uniprot/blast/">New search</a></p>
<table class="hits"><tr><th>Entry</th><th>Entry name</th><th>Protein names</th><th>Organism</th><th>Length</th>
<th>Identity</th><th>Score</th><th>E-value</th></tr>{rows or "<tr><td colspan='8'>No hits found</td></tr>"}
</table><h2>Alignments</h2>{aligns}""")
    return later(render)


# ---------------------------------------------------------------------------------------------
# ExPASy Translate (web.expasy.org/translate/): a DNA sequence in, its six reading frames out.

@route(r"/expasy/translate/?")
def expasy_translate(req):
    result = ""
    if req.method == "POST":
        seq = re.sub(r"[^A-Za-z]", "", "".join(x for x in req.get("dna_sequence").splitlines()
                                                if not x.startswith(">")))[:MAX_RESIDUES].upper()
        if not seq:
            raise InputError("Please enter a DNA or RNA sequence.")
        fmt = req.get("output_format", "verbose")
        for label, strand in (("5'3'", seq), ("3'5'", revcomp(seq))):
            for f in range(3):
                aa = translate(strand[f:])
                shown = {"compact": aa.replace("*", "-"),
                         "verbose": " ".join("Met" if c == "M" else "Stop" if c == "*" else c for c in aa),
                         "nucleotide": strand[f:] + "\n" + "  ".join(aa)}.get(fmt, aa)
                result += f"<h3>{label} Frame {f + 1}</h3><pre>{esc(shown)}</pre>"
    return page("ExPASy - Translate tool", f"""<div id="sib_header"><a href="/expasy/translate/">ExPASy</a>
 Bioinformatics Resource Portal</div><h1>Translate tool</h1>
<p>Translate is a tool which allows the translation of a nucleotide (DNA/RNA) sequence to a protein sequence.</p>
<form method="post" action="/expasy/translate/"><p>Please enter a DNA or RNA sequence in the box below
(numbers and blanks are ignored).</p><textarea name="dna_sequence" rows="8" cols="80"></textarea>
<p>Output format: <select name="output_format">{options([("verbose", "Verbose: Met, Stop, spaces between residues"),
      ("compact", "Compact: M, -, no spaces"), ("nucleotide", "Includes nucleotide sequence")])}</select></p>
<input type="submit" value="TRANSLATE!"> <input type="reset" value="Reset"></form>
{f'<h2>Results of translation</h2>{result}' if result else ""}""")


# ---------------------------------------------------------------------------------------------
# NCBI ORFfinder (ncbi.nlm.nih.gov/orffinder/): open reading frames of a nucleotide sequence.

def find_orfs(seq: str, min_len: int, any_start: bool) -> list[tuple[str, int, int, int, str]]:
    orfs = []
    for strand, s in (("+", seq), ("-", revcomp(seq))):
        for frame in range(3):
            aa, start = translate(s[frame:]), None
            for i, c in enumerate(aa + "*"):
                if start is None and (c == "M" or any_start and c != "*"):
                    start = i
                elif c == "*" and start is not None:
                    if 3 * (i - start + 1) >= min_len:
                        b, e = frame + 3 * start + 1, frame + 3 * i + 3
                        if strand == "-":
                            b, e = len(s) - b + 1, len(s) - e + 1
                        orfs.append((strand, frame + 1, b, e, aa[start:i]))
                    start = None
    return sorted(orfs, key=lambda o: -len(o[4]))


@route(r"/orffinder/?")
def orffinder(req):
    result = ""
    if req.method == "POST":
        seq = re.sub(r"[^A-Za-z]", "", "".join(x for x in req.get("SEQUENCE").splitlines()
                                                if not x.startswith(">")))[:MAX_RESIDUES].upper()
        if len(seq) < 30:
            raise InputError("Sequence is empty or too short.")
        orfs = find_orfs(seq, int(_float(req.get("ORF_SIZE"), 75)), req.get("START_CODON") == "2")
        rows = "".join(f"<tr><td>ORF{n}</td><td>{st}</td><td>{fr}</td><td>{b}</td><td>{e}</td>"
                       f"<td>{abs(e - b) + 1} | {len(p)}</td></tr>" for n, (st, fr, b, e, p) in enumerate(orfs, 1))
        fasta = "".join(f">lcl|ORF{n}\n{p}\n" for n, (*_, p) in enumerate(orfs, 1))
        result = (f"<h2>Open Reading Frames ({len(orfs)} found)</h2><table><tr><th>Label</th><th>Strand</th>"
                  f"<th>Frame</th><th>Start</th><th>Stop</th><th>Length (nt | aa)</th></tr>{rows}</table>"
                  f"<pre>{esc(fasta)}</pre>")
    return orf_page("ORFfinder Home - NCBI", f"""<h1>ORFfinder</h1>
<p>ORFfinder searches for open reading frames (ORFs) in the DNA sequence you enter.</p>
<form method="post" action="/orffinder/"><p>Enter accession number, gi, or nucleotide sequence in FASTA format:</p>
<textarea name="SEQUENCE" rows="8" cols="80"></textarea><br>
From <input name="FROM" size="8"> To <input name="TO" size="8">
<p>Genetic code <select name="GCODE">{options([("1", "1. Standard"), ("2", "2. Vertebrate Mitochondrial"),
                                              ("11", "11. Bacterial, Archaeal and Plant Plastid")])}</select>
ORF minimal length <select name="ORF_SIZE">{options([(n, n) for n in ("30", "75", "150", "300", "600")], "75")}
</select></p><p>ORF start codon to use: <input type="radio" name="START_CODON" value="0" checked>"ATG" only
<input type="radio" name="START_CODON" value="1">"ATG" and alternative initiation codons
<input type="radio" name="START_CODON" value="2">Any sense codon</p>
<p><input type="checkbox" name="IGNORE_NESTED" value="1"> Ignore nested ORFs</p>
<input type="submit" value="Submit"></form>{result}""")


# ---------------------------------------------------------------------------------------------
# JGI IMG/M (img.jgi.doe.gov): its BLAST is for signed-in users; everything redirects to the
# JGI single sign-on page, whose form never accepts (there is no account).

@route(r"/img/cgi-bin/main\.cgi")
def img_main(req):
    if req.cookie("jgi_session"):
        return page("IMG", "<p>Your session has expired.</p><a href='/img/login'>Sign in</a>")
    back = "/img/cgi-bin/main.cgi?" + urlencode({k: v[0] for k, v in req.args.items()})
    return redirect("/img/login?" + urlencode({"redirect": back}), 302)


@route(r"/img/login")
def img_login(req):
    error = ""
    if req.method == "POST":
        error = '<p class="error">Invalid login or password. Please try again.</p>'
    return page("JGI Single Sign On", f"""<h1>JGI Single Sign On</h1>{error}
<p>The IMG BLAST tools are available to registered users. Please sign in.</p>
<form method="post" action="/img/login"><input type="hidden" name="redirect" value="{esc(req.get("redirect"))}">
<label>Email or username <input name="login" type="text"></label><br>
<label>Password <input name="password" type="password"></label><br><input type="submit" value="Sign In"></form>
<p><a href="{offsite("https://contacts.jgi.doe.gov/registration/new")}">Create an account</a> |
<a href="{offsite("https://signon.jgi.doe.gov/password_resets/new")}">Forgot password?</a></p>""")


# ---------------------------------------------------------------------------------------------
# GenBank BankIt (ncbi.nlm.nih.gov/WebSub/): submits a new sequence; the answer acknowledges it.

@route(r"/bankit/?")
def bankit(req):
    if req.method == "POST":
        if not re.fullmatch(r"[^@\s]+@[^@\s]+\.\w+", req.get("email").strip()):
            raise InputError("Please enter a valid e-mail address for the submitter.")
        query = parse_query(req.get("sequence"))
        if query.kind != "dna":
            raise InputError("BankIt accepts nucleotide sequences only.")
        sub = f"BankIt{2800000 + secrets.randbelow(99999)}"
        lines = "\n".join(query.residues[i:i + 60] for i in range(0, len(query.residues), 60))
        return bankit_page("BankIt: submission received", f"""<h1>Submission received</h1>
<p>Thank you. Your submission <b>{sub}</b> has been received. GenBank staff will review it and send the accession
number to {esc(req.get("email"))} within 2 working days.</p><h2>Sequence 1 ({len(query.residues)} bp,
{esc(req.get("mol_type", "genomic DNA"))}, {esc(req.get("organism"))})</h2>
<pre>&gt;{esc(req.get("seq_title") or "Seq1")}\n{lines}</pre>""")
    return bankit_page("BankIt - GenBank sequence submission", f"""<h1>BankIt</h1>
<p>Submit nucleotide sequences to GenBank.</p><form method="post" action="/bankit/">
<fieldset><legend>Submitter</legend>First name <input name="first_name"> Last name <input name="last_name">
E-mail <input name="email" type="email"></fieldset><fieldset><legend>Sequence</legend>
Organism <input name="organism"> Molecule type <select name="mol_type">{options([(m, m) for m in (
    "genomic DNA", "mRNA", "rRNA", "viral cRNA")])}</select><br>Sequence title <input name="seq_title" size="60"><br>
<textarea name="sequence" rows="8" cols="80"></textarea></fieldset>
<p>Release: <input type="radio" name="release" value="now" checked> immediately
<input type="radio" name="release" value="hold"> hold until publication</p>
<input type="submit" value="Submit"></form>""")


# ---------------------------------------------------------------------------------------------
# Entrez (ncbi.nlm.nih.gov/nuccore?term=...): keyword search of the sequence records' titles.

def entrez_records(db: str) -> list[tuple[str, str, str]]:
    names = ("nt", "est") if db == "nuccore" else ("prot",)
    return [(d.split()[0], d.split(" ", 1)[1], s) for n in names for d, s in DATA["records"][n]]


@route(r"/entrez/?")
def entrez_home(req):
    return entrez_page("Entrez", f"""<h1>Search NCBI databases</h1><form method="get" action="/entrez/search">
<select name="db">{options([("nuccore", "Nucleotide"), ("protein", "Protein")])}</select>
<input name="term" size="50" title="Search term"> <input type="submit" value="Search"></form>""")


@route(r"/entrez/search")
def entrez_search(req):
    db = req.get("db") if req.get("db") in ("nuccore", "protein") else "nuccore"
    return redirect(f"/entrez/{db}/?" + urlencode({"term": req.get("term")}), 302)


@route(r"/entrez/(nuccore|protein)/?")
def entrez_results(req, db):
    term = req.get("term").strip()[:200]
    words = [w.lower() for w in re.findall(r"[\w.]+", re.sub(r"\[\w+\]", "", term))]
    found = [r for r in entrez_records(db) if words and all(w in (r[0] + " " + r[1]).lower() for w in words)]
    unit = "bp linear DNA" if db == "nuccore" else "aa protein"
    items = "".join(f'<div class="rslt"><p class="title"><a href="/entrez/{db}/{esc(acc)}">{esc(title)}</a></p>'
                    f'<div class="supp"><p class="desc">{len(seq):,} {unit}</p><p>Accession: {esc(acc)}</p></div></div>'
                    for acc, title, seq in found)
    head = f"<p>Items: 1 to {len(found)} of {len(found)}</p>" if found else "<p>No items found.</p>"
    return entrez_page(f"{term} - {db.capitalize()} - NCBI", f"""<form method="get" action="/entrez/search">
<input type="hidden" name="db" value="{db}"><input name="term" value="{esc(term)}" size="50">
<input type="submit" value="Search"></form><h2>Search results</h2>{head}{items}""")


@route(r"/entrez/(nuccore|protein)/([\w.|]+)")
def entrez_record(req, db, acc):
    rec = next((r for r in entrez_records(db) if r[0] == acc), None)
    if rec is None:
        return Resp(entrez_page("Not found", "<p>No items found.</p>"), 404)
    body = "\n".join(f"{i + 1:>9} " + " ".join(rec[2][j:j + 10] for j in range(i, min(i + 60, len(rec[2])), 10))
                     for i in range(0, len(rec[2]), 60))
    return entrez_page(rec[1], f"<h1>{esc(rec[1])}</h1><pre>LOCUS       {esc(acc)}  {len(rec[2])}\n"
                             f"DEFINITION  {esc(rec[1])}\nORIGIN\n{body.lower()}\n//</pre>")


# ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    from twisted.internet import reactor
    root = Path(tempfile.mkdtemp(prefix="holdout2-"))
    try:
        build_databases(root)
        port = reactor.listenTCP(args.port, make_site(), interface="127.0.0.1")
        print(f"http://127.0.0.1:{port.getHost().port}/", flush=True)
        reactor.run()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
