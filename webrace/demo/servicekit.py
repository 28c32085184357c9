"""What the local test services share: the BLAST reports they write (pure Python) and the
Twisted plumbing of one service (``Service``, ``Problem``, form arguments). The services
themselves are in ``webrace.demo.services`` (and ``blastplus``, ``scripted``), which list them."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from html import escape
from random import Random

from twisted.web.resource import Resource
from twisted.web.server import Request
from twisted.web.util import redirectTo

HOST = "127.0.0.1"
CLASSES = ("nucleotide_blast", "protein_blast", "keyword_search")
ROBOTS_TXT = b"User-agent: *\nDisallow: /private/\n"
NUCLEOTIDES = frozenset("ACGTN")
AMINO_ACIDS = frozenset("ACDEFGHIKLMNPQRSTVWYBZXUO*")
MIN_HIT = 20  # letters: shorter queries find nothing
LINE = 60  # alignment letters per line, as NCBI
HOSTILE_BYTES = 5 * 1024 * 1024
SEEDS = "dynabot-seeds.txt"


# ---------------------------------------------------------------------------------------------
# Reports: pure Python
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    gi: int
    accession: str  # with its version
    title: str
    length: int
    db: str = "gb"

    @property
    def defline(self) -> str:
        return f"gi|{self.gi}|{self.db}|{self.accession}| {self.title}"

    @property
    def link(self) -> str:
        return f"/entrez/{self.accession.split('.')[0]}"


DNA_SUBJECTS = (
    Subject(12345, "AF123456.1", "Homo sapiens clone XYZ mRNA", 1520),
    Subject(27432, "BC004871.2", "Mus musculus cDNA clone MGC:7412", 2210),
    Subject(88121, "AY512774.1", "Danio rerio heat shock protein 70 gene, complete cds", 3904),
    Subject(40922, "NM_000518.5", "Homo sapiens hemoglobin subunit beta (HBB), mRNA", 626, "ref"),
    Subject(61003, "X03205.1", "Human 18S rRNA gene", 1869),
)
PROTEIN_SUBJECTS = (
    Subject(4504349, "P69905.2", "Hemoglobin subunit alpha [Homo sapiens]", 142, "sp"),
    Subject(1170755, "P02769.4", "Albumin precursor [Bos taurus]", 607, "sp"),
    Subject(6175083, "Q9Y6K9.1", "NF-kappa-B essential modulator [Homo sapiens]", 419, "sp"),
    Subject(2506545, "P00533.2", "Epidermal growth factor receptor [Homo sapiens]", 1210, "sp"),
)
PROTEIN_TEMPLATE = "MKVLAAGIVGLLLAQSTEAAPRWDHYEFNKLGTSPVEMRQDCIWHKAGYNSTLPFEDVRQLMAKSGTHEW"
SIMILAR = {a: b for group in ("ILMV", "FYW", "KRH", "DE", "NQ", "ST") for a in group for b in group if a != b}


@dataclass(frozen=True)
class Hit:
    subject: Subject
    query_start: int  # 1-based
    query: str
    middle: str
    sbjct: str
    sbjct_start: int
    bits: float
    raw: int
    evalue: float
    identities: int
    positives: int


def clean_sequence(text: str) -> tuple[str, str]:
    """(query name, letters) of a submitted sequence: FASTA defline aside, whitespace removed."""
    lines = text.strip().splitlines()
    name = "probe"
    if lines and lines[0].lstrip().startswith(">"):
        name = lines.pop(0).strip()[1:].strip() or name
    return name, "".join("".join(lines).split()).upper()


def is_nucleotide(letters: str) -> bool:
    return bool(letters) and set(letters) <= NUCLEOTIDES


def is_protein(letters: str) -> bool:
    return bool(letters) and set(letters) <= AMINO_ACIDS


def format_evalue(value: float) -> str:
    """The legacy NCBI way of printing an Expect value."""
    if value < 1e-180:
        return "0.0"
    if value < 1e-4:
        return f"{value:.0e}"
    if value < 0.1:
        return f"{value:.3f}"
    if value < 1:
        return f"{value:.2f}"
    if value < 10:
        return f"{value:.1f}"
    return f"{value:.0f}"


def nucleotide_hits(letters: str) -> list[Hit]:
    """Two hits for a query of 20+ letters: one exact, one with mismatches; the same query, the same hits."""
    if len(letters) < MIN_HIT:
        return []
    rng = Random(zlib.crc32(letters.encode()))  # noqa: S311 - reproducible demo data, no secret
    hits = []
    for n, subject in enumerate(rng.sample(DNA_SUBJECTS, 2)):
        length = rng.randint(MIN_HIT, min(len(letters), 150))
        start = rng.randint(0, len(letters) - length)
        query = letters[start:start + length]
        sbjct = list(query)
        for pos in rng.sample(range(length), n * max(1, length // 12)):  # the second hit: ~8% mismatches
            sbjct[pos] = "ACGT"[("ACGTN".index(query[pos]) + 1) % 4]
        sbjct = "".join(sbjct)
        middle = "".join("|" if a == b else " " for a, b in zip(query, sbjct, strict=True))
        same = middle.count("|")
        raw = same - 3 * (length - same)  # reward 1, penalty -3
        bits = (1.37 * raw + 0.341) / math.log(2)
        evalue = len(letters) * 1e7 * 2 ** -bits
        hits.append(Hit(subject, start + 1, query, middle, sbjct, rng.randint(1, subject.length - length), bits, raw,
                        evalue, same, same))
    return sorted(hits, key=lambda h: -h.bits)


def protein_hits(letters: str) -> list[Hit]:
    """Two hits: the query's letters against made-up proteins, identities, positives (+) and others."""
    if len(letters) < MIN_HIT:
        return []
    rng = Random(zlib.crc32(letters.encode()))  # noqa: S311 - reproducible demo data, no secret
    hits = []
    for subject in rng.sample(PROTEIN_SUBJECTS, 2):
        length = rng.randint(MIN_HIT, min(len(letters), 120))
        start = rng.randint(0, len(letters) - length)
        query = letters[start:start + length]
        sbjct, middle = [], []
        for pos, letter in enumerate(query):
            draw = rng.random()
            if draw < 0.55:
                sbjct.append(letter)
                middle.append(letter)
            elif draw < 0.75 and letter in SIMILAR:
                sbjct.append(SIMILAR[letter])
                middle.append("+")
            else:
                other = PROTEIN_TEMPLATE[(start + pos) % len(PROTEIN_TEMPLATE)]
                sbjct.append(other)
                middle.append(letter if other == letter else " ")
        middle_text = "".join(middle)
        same = sum(c.isalpha() for c in middle_text)
        positive = same + middle_text.count("+")
        raw = 5 * same + (positive - same) - (length - positive)
        bits = (0.267 * raw + 3.34) / math.log(2)
        evalue = len(letters) * 1e8 * 2 ** -bits
        hits.append(Hit(subject, start + 1, query, middle_text, "".join(sbjct), rng.randint(1, subject.length),
                        bits, raw, evalue, same, positive))
    return sorted(hits, key=lambda h: -h.bits)


# A report is a list of lines; a line may link somewhere (the subject deflines do).
ReportLine = tuple[str, str | None]


def blast_report(name: str, letters: str, program: str, *, plus: bool = False,
                 hits: list[Hit] | None = None) -> list[ReportLine]:
    """An NCBI-style report; ``plus`` writes alignments as BLAST+ does (``Query  1  ACGT  4``);
    ``hits`` by default: the query's own."""
    protein = program == "BLASTP"
    if hits is None:
        hits = protein_hits(letters) if protein else nucleotide_hits(letters)
    version = "2.2.28+" if plus else "2.2.26 [Sep-21-2011]"
    lines: list[ReportLine] = [(f"{program} {version}", None), (f"Query= {name}", None),
                               (f"         ({len(letters)} letters)", None), ("", None)]
    if not hits:
        return [*lines, (" ***** No hits found ******", None), ("", None)]
    lines.append(("Sequences producing significant alignments:                      (bits) Value", None))
    for hit in hits:
        lines.append((f"{hit.subject.defline[:64]:<64} {hit.bits:6.0f}   {format_evalue(hit.evalue)}", None))
    for hit in hits:
        lines += [("", None), (f">{hit.subject.defline}", hit.subject.link),
                  (f"          Length = {hit.subject.length}", None), ("", None),
                  (f" Score = {hit.bits:.1f} bits ({hit.raw}), Expect = {format_evalue(hit.evalue)}", None)]
        size = len(hit.query)
        identities = f" Identities = {hit.identities}/{size} ({100 * hit.identities // size}%)"
        if protein:
            lines.append((f"{identities}, Positives = {hit.positives}/{size} ({100 * hit.positives // size}%)", None))
        else:
            lines += [(identities, None), (" Strand = Plus / Plus", None)]
        lines += [(text, None) for text in alignment_lines(hit, plus)]
    return lines


def alignment_lines(hit: Hit, plus: bool) -> list[str]:
    lines = []
    width = len(str(max(hit.query_start, hit.sbjct_start) + len(hit.query)))  # one column for every block
    for offset in range(0, len(hit.query), LINE):
        query, middle, sbjct = (s[offset:offset + LINE] for s in (hit.query, hit.middle, hit.sbjct))
        q_from, s_from = hit.query_start + offset, hit.sbjct_start + offset
        if plus:
            lines += ["", f"Query  {q_from:<{width}}  {query}  {q_from + len(query) - 1}",
                      f"       {'':<{width}}  {middle}",
                      f"Sbjct  {s_from:<{width}}  {sbjct}  {s_from + len(sbjct) - 1}"]
        else:
            lines += ["", f"Query: {q_from:<{width}} {query} {q_from + len(query) - 1}",
                      f"       {'':<{width}} {middle}",
                      f"Sbjct: {s_from:<{width}} {sbjct} {s_from + len(sbjct) - 1}"]
    return lines


def report_text(lines: list[ReportLine]) -> str:
    return "\n".join(text for text, _ in lines) + "\n"


def report_html(lines: list[ReportLine]) -> str:
    rendered = [f'<a href="{link}">{escape(text)}</a>' if link else escape(text) for text, link in lines]
    return "<pre>\n" + "\n".join(rendered) + "\n</pre>"


def hostile_body() -> bytes:
    """5 MB of BLAST-like text whose alignments never complete: a trap for backtracking matchers."""
    head = "BLASTN 2.2.26 [Sep-21-2011]\nQuery= probe\n         (4000 letters)\n\n"
    chunk = f"Query: 1 {'A' * 4000}\n          {'|' * 3999}\nSbjct: 1 {'A' * 3998}C\n\n"
    body = head + chunk * (HOSTILE_BYTES // len(chunk) + 1)
    return f"<html><body><pre>\n{body}</pre></body></html>".encode()


# The documents of the demo search engines: a result holds every word of the query, so a word
# no document has finds nothing (what a real engine answers, and what a control probe expects).
DOCUMENTS = (
    (101, "How a web crawler finds pages", "A web crawler starts from seed pages and follows their links, "
          "breadth first or by a priority of its own."),
    (108, "Polite crawling", "A polite web crawler reads robots.txt, waits between two requests to one host "
          "and names itself in its User-Agent."),
    (115, "Re-crawling with conditional requests", "A crawler that saw a page before sends If-Modified-Since "
          "and If-None-Match, and the server answers 304 when nothing changed."),
    (122, "Search engines and their indexes", "The crawler of a search engine feeds its index; the engine "
          "answers each query from the index, not from the web."),
    (129, "Focused crawling", "A focused web crawler follows the links likeliest to lead to pages on its topic "
          "and leaves the others."),
    (136, "The Deep Web", "Pages behind search forms are the Deep Web: a crawler reaches them only by "
          "filling the forms in."),
    (143, "Archiving the web", "WARC files keep what a web crawler fetched: requests, responses and their "
          "headers, as they were."),
    (150, "Nucleotide sequences", "BLAST compares a nucleotide sequence with the sequences of a database and "
          "reports the alignments it finds."),
    (157, "Protein databases", "Swiss-Prot and PDB hold protein sequences; blastp searches them with a protein "
          "query."),
    (164, "Link analysis", "Links between pages tell a search engine which pages matter: many links from "
          "pages that matter make a page matter."),
)


def search_results(query: str) -> list[tuple[int, str, str]]:
    """(doc number, title, snippet) of the first five documents holding every word of a keyword
    query (any case); none for an empty query or a word no document has."""
    words = query.lower().split()
    if not words:
        return []
    found = [(doc, title, f"... {text} ...") for doc, title, text in DOCUMENTS
             if all(word in f"{title} {text}".lower() for word in words)]
    return found[:5]


# ---------------------------------------------------------------------------------------------
# The web server (Twisted, in its own process)
# ---------------------------------------------------------------------------------------------


class Problem(Exception):
    """An error page: the status and what it says."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def html_page(title: str, body: str) -> bytes:
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{escape(title)}</title></head>\n'
            f"<body>\n<h1>{escape(title)}</h1>\n{body}\n</body></html>\n").encode()


def arg(request: Request, name: str, default: str = "") -> str:
    values = request.args.get(name.encode(), [])
    return values[0].decode("utf-8", "replace") if values else default


def expect_method(request: Request, method: str) -> None:
    allowed = (b"GET", b"HEAD") if method == "GET" else (method.encode(),)
    if request.method not in allowed:
        request.setHeader(b"Allow", method.encode())
        raise Problem(405, f"Method {request.method.decode()} not allowed; this form is sent with {method}.")


class Service(Resource):
    """One service under its own prefix. ``pages`` maps the path below the prefix to a method
    returning an HTML page (str body or full bytes); ``""`` is the start page."""

    isLeaf = True
    title = ""
    pages: dict[str, str] = {"": "start"}

    def render(self, request: Request) -> bytes:
        if not request.postpath:  # /name -> /name/, so relative actions resolve under the prefix
            return redirectTo(request.prePathURL() + b"/", request)
        page = self.pages.get(b"/".join(request.postpath).decode("utf-8", "replace"))
        request.setHeader(b"Content-Type", b"text/html; charset=utf-8")
        try:
            if page is None:
                raise Problem(404, "No such page.")
            body = getattr(self, page)(request)
        except Problem as problem:
            request.setResponseCode(problem.status)
            return html_page("Error", f'<p class="error">{escape(str(problem))}</p>')
        return body if isinstance(body, bytes) else html_page(self.title, body)


def nucleotide_query(text: str) -> tuple[str, str]:
    name, letters = clean_sequence(text)
    if not is_nucleotide(letters):
        raise Problem(200, "Invalid nucleotide sequence: only A, C, G, T and N are allowed."
                      if letters else "Invalid nucleotide sequence: the query is empty.")
    return name, letters


def protein_query(text: str) -> tuple[str, str]:
    name, letters = clean_sequence(text)
    if not is_protein(letters):
        raise Problem(200, "Invalid protein sequence: use the one-letter amino acid codes."
                      if letters else "Invalid protein sequence: the query is empty.")
    return name, letters


def report_page(request: Request, name: str, letters: str, program: str, *, plus: bool = False,
                text: bool = False) -> str | bytes:
    lines = blast_report(name, letters, program, plus=plus)
    if text:
        request.setHeader(b"Content-Type", b"text/plain; charset=utf-8")
        return report_text(lines).encode()
    return f"<p>Results for {escape(name)}</p>\n{report_html(lines)}"
