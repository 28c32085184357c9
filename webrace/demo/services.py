"""Local web services to try DynaBot on, and to test and benchmark it: BLAST services,
look-alikes, search engines.

``python -m webrace.demo.services [--port N] [--seeds FILE]`` serves them on 127.0.0.1 (a
free port by default) until Ctrl-C: it prints their address first, then every start page
with the service class it belongs to, and writes those start pages to a seeds file for
``scrapy crawl dynabot -a seeds=FILE`` (``dynabot-seeds.txt`` in the current directory, removed
when the services stop).
``Services`` starts that subprocess, knows which start URLs are members of which service
class, and reads the server's request log (``/__hits``, cleared by ``/__reset``). A
subprocess, not a thread, because a test process that runs Scrapy in-process owns the only
Twisted reactor it may have.

Every service lives under ``/<name>/``: a start page with its form, and the pages behind it.

================  =====================================================  ===================
name              form                                                   member of
================  =====================================================  ===================
blastn-get        GET, textarea ``sequence``                             nucleotide_blast
blastn-post       POST, ~17 parameters; ``QUERY_DATA``; results only     nucleotide_blast
                  with PROGRAM=blastn (default blastp) and a real
                  DATABASE (first option empty); first button "Clear"
blastn-multipart  multipart POST, ``seq_input`` labelled "Enter your     nucleotide_blast
                  nucleotide sequence", a file input; BLAST+ layout
blastn-format     POST ``SEQ`` -> a format page (hidden RID, format      nucleotide_blast
                  selects, submit) -> the report
blastn-job        POST ``query`` -> "job running" page -> link "View     nucleotide_blast
                  results" -> the report
blastn-nohits     POST ``query_sequence``: "***** No hits found ******"  nucleotide_blast
blastn-db         GET text ``q``, select ``db`` whose first options are  nucleotide_blast
                  protein databases (errors): iterate the options
blastn-options    POST ``input``; selects ``p`` (default blastp) and     nucleotide_blast
                  ``lib`` (default a protein library); a wrong choice
                  gets HTTP 400 saying what is wrong
blastn-queue      POST ``seq`` -> 303 -> a job page refreshing itself    nucleotide_blast
                  -> a link with ``&amp;`` under ``<base href>``
blastplus-text    POST ``QUERY``, selects ``DATABASE``, ``PROGRAM``: the    nucleotide_blast
                  REAL ``blastn -outfmt 0`` in ``<pre>`` (only when
                  BLAST+ is installed; webrace.demo.blastplus)
blastplus-html    as blastplus-text, BLAST+'s own ``-html`` report       nucleotide_blast
blastn-wizard     a frame around a form choosing the program (radio,     nucleotide_blast
                  default tblastx), then a form taking the sequence
blastp-get        as blastn-get, protein reports                         protein_blast
blastp-post       as blastn-post, PROGRAM=blastp (default blastx)        protein_blast
browse            selects and radios, no text input                      none
login             username + password                                    none
contact           any text: "Thank you for your message"                 none
about             no form at all                                         none
broken            textarea ``sequence``, the action answers 500          none
search-get        GET ``q``: up to 5 results with snippets holding the   keyword_search
                  words, "No results" for a word no document has
search-post       POST ``query`` + select ``lang``: as search-get        keyword_search
search-none       GET ``q``: always "No results"                         none
search-echo       GET ``q``: five "results" holding whatever was asked   none
                  (a nonsense word too: no control probe backs it)
scripted-blastn   none in the HTML: a script builds it (textarea         nucleotide_blast
                  ``seq``, select ``db``) and sends it with fetch() to
                  a JSON API, writing the report into the page
                  (webrace.demo.scripted; DynaBot's browser mode)
scripted-news     scripts and a search box outside any form; no form     none
hostile           GET ``sequence``: 5 MB of never-complete alignments    (unlisted)
failing           a BLAST form whose action answers HTTP 500             (unlisted)
endless           every answer another "view results" page, new URL      (unlisted)
offsite           a BLAST form posting to another host (127.0.0.2:9)     (unlisted)
scripted-offsite  as offsite, the form built by a script                 (unlisted)
huge              a BLAST form answered with 10 MB                       (unlisted)
private           a BLAST form under ``/private/``, which robots.txt     (unlisted)
                  disallows
robots-form       an allowed page whose form's action is under           (unlisted)
                  ``/private/``
================  =====================================================  ===================

Reports (``webrace.demo.servicekit``) follow the legacy NCBI plain-text layout inside ``<pre>``
and depend on the submitted sequence: each hit aligns a 20+ letter piece of it; the
``blastplus-*`` services (``webrace.demo.blastplus``) run the real BLAST+ instead, and the
``scripted-*`` ones (``webrace.demo.scripted``) build their form with scripts. A sequence with letters outside ACGTN
(FASTA defline and whitespace aside) gets "Invalid nucleotide sequence" from the nucleotide
services. ``/`` links every start page; ``/doc/N`` and ``/entrez/ACC`` answer the result links.
"""

from __future__ import annotations

import argparse
import json
import select
import signal
import subprocess
import sys
import tempfile
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from types import TracebackType

from twisted.web.resource import Resource
from twisted.web.server import Request, Site

from webrace.demo import scripted as scripted_services
from webrace.demo.blastplus import BlastPlus
from webrace.demo.servicekit import (
    CLASSES,
    HOST,
    ROBOTS_TXT,
    SEEDS,
    Problem,
    Service,
    arg,
    blast_report,
    clean_sequence,
    expect_method,
    hostile_body,
    html_page,
    is_nucleotide,
    nucleotide_query,
    protein_query,
    report_html,
    report_page,
    search_results,
)


class SimpleBlast(Service):
    """(a) A GET form with a textarea named ``sequence``."""

    pages = {"": "start", "search": "search"}

    def __init__(self, program: str = "BLASTN") -> None:
        super().__init__()
        self.program = program
        self.title = f"Simple {program}"

    def start(self, request: Request) -> str:
        return ('<form action="search" method="get">\n<p>Paste a sequence in FASTA format:</p>\n'
                '<textarea name="sequence" rows="8" cols="70"></textarea><br>\n'
                '<input type="submit" value="BLAST"></form>')

    def search(self, request: Request) -> str | bytes:
        expect_method(request, "GET")
        check = protein_query if self.program == "BLASTP" else nucleotide_query
        return report_page(request, *check(arg(request, "sequence")), self.program)


class RobotsForm(SimpleBlast):
    """A start page robots.txt allows whose form sends to ``/private/``, which it does not:
    a polite prober never submits it."""

    def start(self, request: Request) -> str:
        return ('<form action="/private/search" method="get">\n<p>Paste a sequence:</p>\n'
                '<textarea name="sequence" rows="8" cols="70"></textarea><br>\n'
                '<input type="submit" value="BLAST"></form>')


class ComplexBlast(Service):
    """(b) A POST form of ~17 parameters, NCBI style, with traps: the right program is not the
    default, the first database is no database, and the first submit button clears the form."""

    pages = {"": "start", "blast.cgi": "submit"}

    def __init__(self, program: str = "BLASTN") -> None:
        super().__init__()
        self.program = program
        self.title = f"{program} search"
        if program == "BLASTP":
            self.programs, self.wanted = (("blastx", True), ("tblastn", False), ("blastp", False)), "blastp"
            self.databases = (("nr", "Non-redundant protein sequences"), ("swissprot", "UniProtKB/Swiss-Prot"),
                              ("pdb", "Protein Data Bank"), ("nt", "Nucleotide collection"))
            self.real = {"nr", "swissprot", "pdb"}
        else:
            self.programs, self.wanted = (("tblastx", False), ("blastp", True), ("blastn", False)), "blastn"
            self.databases = (("nt", "Nucleotide collection (nt)"), ("est", "Expressed sequence tags"),
                              ("htgs", "High throughput genomic sequences"), ("swissprot", "UniProtKB/Swiss-Prot"))
            self.real = {"nt", "est", "htgs"}

    def start(self, request: Request) -> str:
        programs = "".join(f'<option value="{p}"{" selected" if on else ""}>{p}</option>' for p, on in self.programs)
        databases = '<option value="">-- choose a database --</option>' + "".join(
            f'<option value="{value}">{escape(label)}</option>' for value, label in self.databases)
        return f"""<form name="MainBlastForm" action="blast.cgi" method="post">
<input type="hidden" name="CMD" value="Put"><input type="hidden" name="SERVICE" value="plain">
<input type="hidden" name="CLIENT" value="web"><input type="hidden" name="PAGE" value="Search">
<table>
<tr><td>Program</td><td><select name="PROGRAM">{programs}</select></td></tr>
<tr><td>Database</td><td><select name="DATABASE">{databases}</select></td></tr>
<tr><td colspan="2">Enter query sequence (FASTA or plain)<br>
<textarea name="QUERY_DATA" rows="6" cols="60"></textarea></td></tr>
<tr><td>Query subrange</td><td>From <input name="QUERY_FROM" size="6"> To <input name="QUERY_TO" size="6"></td></tr>
<tr><td>Expect</td><td><input name="EXPECT" value="10" size="5"></td></tr>
<tr><td>Matrix</td><td><select name="MATRIX_NAME"><option selected>BLOSUM62</option><option>PAM30</option>
<option>PAM70</option><option>BLOSUM80</option></select></td></tr>
<tr><td>Filter</td><td><input type="checkbox" name="FILTER" value="L" checked> Low complexity</td></tr>
<tr><td>Megablast</td><td><input type="checkbox" name="MEGABLAST" value="on"></td></tr>
<tr><td>Descriptions</td><td><select name="DESCRIPTIONS"><option>100</option><option>250</option>
<option>500</option></select></td></tr>
<tr><td>Alignments</td><td><select name="ALIGNMENTS"><option>50</option><option>100</option></select></td></tr>
<tr><td>Format</td><td><input type="radio" name="FORMAT_TYPE" value="HTML" checked> HTML
<input type="radio" name="FORMAT_TYPE" value="Text"> Plain text</td></tr>
<tr><td>E-mail results to</td><td><input type="text" name="EMAIL" size="30"></td></tr>
</table>
<input type="submit" name="action" value="Clear"> <input type="submit" name="action" value="Search">
</form>"""

    def submit(self, request: Request) -> str | bytes:
        expect_method(request, "POST")
        if arg(request, "action") == "Clear":
            return self.start(request)
        program, database = arg(request, "PROGRAM"), arg(request, "DATABASE")
        if program != self.wanted or database not in self.real:
            raise Problem(200, f"Please choose a database and program: {program or 'no program'} cannot search "
                          f"{database or 'no database'} with this query type.")
        try:
            float(arg(request, "EXPECT", "10"))
        except ValueError:
            raise Problem(200, "The Expect value must be a number.") from None
        check = protein_query if self.program == "BLASTP" else nucleotide_query
        return report_page(request, *check(arg(request, "QUERY_DATA")), self.program,
                           text=arg(request, "FORMAT_TYPE") == "Text")


class MultipartBlast(Service):
    """(c) A multipart form; the sequence is typed into ``seq_input`` or uploaded as ``seq_file``."""

    title = "Nucleotide BLAST (upload)"
    pages = {"": "start", "run": "run"}

    def start(self, request: Request) -> str:
        return """<form action="run" method="post" enctype="multipart/form-data">
<p><label for="seq">Enter your nucleotide sequence</label><br>
<textarea id="seq" name="seq_input" rows="8" cols="70"></textarea></p>
<p><label for="file">or upload a FASTA file</label> <input id="file" type="file" name="seq_file"></p>
<p><label>Program <select name="program"><option value="megablast" selected>megablast</option>
<option value="blastn">blastn</option></select></label>
<label><input type="checkbox" name="lowercase" value="yes"> mask lower case</label></p>
<input type="hidden" name="job_title" value="">
<button type="submit">Run</button></form>"""

    def run(self, request: Request) -> str | bytes:
        expect_method(request, "POST")
        if not (request.getHeader(b"content-type") or b"").startswith(b"multipart/form-data"):
            raise Problem(400, "This form must be submitted as multipart/form-data.")
        return report_page(request, *nucleotide_query(arg(request, "seq_input") or arg(request, "seq_file")),
                           "BLASTN", plus=True)


class FormatBlast(Service):
    """(d) The query form leads to a format page whose own form shows the report."""

    title = "BLAST with formatting"
    pages = {"": "start", "put": "put", "get": "get"}

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, tuple[str, str]] = {}

    def start(self, request: Request) -> str:
        return ('<form action="put" method="post"><input type="hidden" name="CMD" value="Put">\n'
                '<p>Query sequence:<br><textarea name="SEQ" rows="6" cols="60"></textarea></p>\n'
                '<input type="submit" value="Submit query"></form>')

    def put(self, request: Request) -> str:
        expect_method(request, "POST")
        query = nucleotide_query(arg(request, "SEQ"))
        rid = f"R{len(self.jobs) + 1:04d}-{zlib.crc32(query[1].encode()):08X}"
        self.jobs[rid] = query
        return (f"<p>Your request has been submitted. Request ID: <b>{rid}</b></p>\n"
                f'<form action="get" method="get"><input type="hidden" name="RID" value="{rid}">\n'
                '<input type="hidden" name="CMD" value="Get">\n'
                '<p>Format: <select name="FORMAT_TYPE"><option>HTML</option><option>Text</option></select>\n'
                'Alignment view: <select name="ALIGNMENT_VIEW"><option>Pairwise</option>'
                "<option>QueryAnchored</option></select></p>\n"
                '<input type="submit" value="View report"></form>')

    def get(self, request: Request) -> str | bytes:
        expect_method(request, "GET")
        query = self.jobs.get(arg(request, "RID"))
        if query is None:
            raise Problem(404, "Unknown request ID.")
        return report_page(request, *query, "BLASTN", text=arg(request, "FORMAT_TYPE") == "Text")


class JobBlast(Service):
    """(e) The query form answers "job running" with a link to the results."""

    title = "BLAST job server"
    pages = {"": "start", "submit": "submit", "results": "results"}

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[tuple[str, str]] = []

    def start(self, request: Request) -> str:
        return ('<form action="submit" method="post">\n<p>Sequence <textarea name="query" rows="6" cols="60">'
                '</textarea></p>\n<p>Database <select name="database"><option value="nt">nt</option></select></p>\n'
                '<input type="submit" name="go" value="Start job"></form>')

    def submit(self, request: Request) -> str:
        expect_method(request, "POST")
        self.jobs.append(nucleotide_query(arg(request, "query")))
        job = len(self.jobs)
        return (f"<p>Job {job} is running. This may take a while.</p>\n"
                f'<p><a href="results?job={job}">View results</a></p>')

    def results(self, request: Request) -> str | bytes:
        expect_method(request, "GET")
        job = arg(request, "job")
        if not job.isdigit() or not 0 < int(job) <= len(self.jobs):
            raise Problem(404, "Unknown job.")
        return report_page(request, *self.jobs[int(job) - 1], "BLASTN")


class NoHitsBlast(Service):
    """(f) A BLAST service whose database holds nothing like any query."""

    title = "Small-genome BLAST"
    pages = {"": "start", "blast": "blast"}

    def start(self, request: Request) -> str:
        return ('<form action="blast" method="post">\n<textarea name="query_sequence" rows="6" cols="60"></textarea>\n'
                '<select name="database"><option value="mito">Mitochondrial genomes</option></select>\n'
                '<input type="submit" value="BLAST"></form>')

    def blast(self, request: Request) -> str:
        expect_method(request, "POST")
        name, letters = nucleotide_query(arg(request, "query_sequence"))
        return report_html(blast_report(name, letters, "BLASTN", hits=[]))


class DatabaseBlast(Service):
    """(g) A text field ``q`` and a select ``db`` whose first options are protein databases."""

    title = "Sequence search"
    pages = {"": "start", "query": "query"}
    databases = (("swissprot", "Swiss-Prot"), ("pdb", "PDB"), ("nt", "GenBank nt"), ("est", "dbEST"))

    def start(self, request: Request) -> str:
        options = "".join(f'<option value="{value}">{label}</option>' for value, label in self.databases)
        return ('<form action="query" method="get">\n<input type="text" name="q" size="80">\n'
                f'<select name="db">{options}</select>\n<input type="submit" value="Search"></form>')

    def query(self, request: Request) -> str | bytes:
        expect_method(request, "GET")
        db = arg(request, "db")
        if db in ("swissprot", "pdb"):
            raise Problem(200, f"Database {db} holds protein sequences; choose a nucleotide database.")
        if db not in ("nt", "est"):
            raise Problem(200, "Unknown database.")
        return report_page(request, *nucleotide_query(arg(request, "q")), "BLASTN")


class OptionBlast(Service):
    """(h) Program and database are selects named ``p`` and ``lib`` (no hint names them), a protein
    program and a protein library selected by default; a wrong choice gets HTTP 400 and a page
    saying what is wrong, the form shown again."""

    title = "Sequence aligner"
    pages = {"": "start", "align": "align"}
    libraries = (("sp", "UniProtKB/Swiss-Prot (protein)", "protein"), ("pdbaa", "PDB chains (protein)", "protein"),
                 ("refgen", "RefSeq genomes (nucleotide)", "nucleotide"),
                 ("wgs", "Whole-genome shotgun contigs (nucleotide)", "nucleotide"))

    def form(self) -> str:
        options = "".join(f'<option value="{v}"{" selected" if v == "sp" else ""}>{label}</option>'
                          for v, label, _ in self.libraries)
        return ('<form action="align" method="post">\n<p>Input <textarea name="input" rows="6" cols="60"></textarea>'
                '</p>\n<p>Program <select name="p"><option selected>blastp</option><option>blastx</option>'
                f'<option>blastn</option><option>tblastn</option></select>\n Library <select name="lib">{options}'
                '</select></p>\n<input type="submit" value="Align"></form>')

    def start(self, request: Request) -> str:
        return f"<p>Align your query against our libraries.</p>\n{self.form()}"

    def align(self, request: Request) -> str | bytes:
        expect_method(request, "POST")
        program, lib = arg(request, "p"), arg(request, "lib")
        name, letters = clean_sequence(arg(request, "input"))
        kind = {v: k for v, _, k in self.libraries}.get(lib)
        problem = None
        if program not in ("blastp", "blastx", "blastn", "tblastn") or kind is None:
            problem = "Unknown program or library."
        elif is_nucleotide(letters) and program in ("blastp", "tblastn"):
            problem = f"Program {program} takes a protein query, and this query is made of nucleotides."
        elif program == "blastn" and kind != "nucleotide":
            problem = f"Library {lib} holds {kind} sequences: {program} needs a nucleotide library."
        elif program == "blastx" and kind != "protein":
            problem = f"Library {lib} holds {kind} sequences: {program} needs a protein library."
        if problem:
            request.setResponseCode(400)
            return f'<p class="alert">{escape(problem)}</p>\n{self.form()}'
        if program != "blastn":
            return "<p>Translated searches are queued for the night run; results go out by mail.</p>"
        return report_page(request, *nucleotide_query(arg(request, "input")), "BLASTN", plus=True)


class QueueBlast(Service):
    """(i) A job queue: the POST answers 303 to the job's page, which refreshes itself
    (``<meta http-equiv=refresh content="1; url=status?job=..&amp;n=..">``) until the job is
    done, then links the report relative to a ``<base href>``, the link's ``&`` written
    ``&amp;``: a URL read without decoding asks for a job that does not exist."""

    title = "BLAST queue"
    pages = {"": "start", "submit": "submit", "status": "status", "out/report": "report"}
    POLLS = 2  # status pages before the job is done

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, tuple[str, str]] = {}

    def start(self, request: Request) -> str:
        return ('<form action="submit" method="post">\n<p>Query <textarea name="seq" rows="6" cols="60">'
                '</textarea></p>\n<input type="submit" value="Submit job"></form>')

    def submit(self, request: Request) -> bytes:
        expect_method(request, "POST")
        query = nucleotide_query(arg(request, "seq"))
        job = f"{zlib.crc32(query[1].encode()) & 0xffffffff:08x}{len(self.jobs)}"
        self.jobs[job] = query
        request.setResponseCode(303)
        request.setHeader(b"Location", f"status?job={job}&n=0".encode())
        return b""

    def _job(self, request: Request) -> str:
        job = arg(request, "job")
        if job not in self.jobs:
            raise Problem(404, "No such job.")
        return job

    def status(self, request: Request) -> str | bytes:
        job = self._job(request)
        polls = arg(request, "n")
        if not polls.isdigit():
            raise Problem(400, "Bad status request.")
        if int(polls) < self.POLLS:
            refresh = f'<meta http-equiv="refresh" content="1; url=status?job={job}&amp;n={int(polls) + 1}">'
            page = html_page(self.title, f"<p>Job {job} is queued. This page refreshes itself.</p>")
            return page.replace(b"<head>", b"<head>" + refresh.encode(), 1)
        return (f'<base href="/{request.prepath[0].decode()}/out/">\n<p>Job {job} has finished.</p>\n'
                f'<p><a href="report?job={job}&amp;format=text">Open the report</a></p>')

    def report(self, request: Request) -> str | bytes:
        job = self._job(request)
        if arg(request, "format") != "text":
            raise Problem(400, "Which format? format=text or format=html.")
        return report_page(request, *self.jobs[job], "BLASTN", plus=True, text=True)


class WizardBlast(Service):
    """(j) Two steps: the start page, a frame around the real page, whose form only chooses the
    program (radio buttons, "Next"); the next page's form takes the sequence (a file upload or
    a text field named ``data``)."""

    title = "BLAST wizard"
    pages = {"": "start", "main": "main", "step2": "step2", "run": "run"}

    def start(self, request: Request) -> bytes:
        return (b'<!DOCTYPE html><html><head><title>BLAST wizard</title></head><body>'
                b'<iframe src="main" width="100%" height="600"></iframe></body></html>')

    def main(self, request: Request) -> str:
        return ('<form action="step2" method="get"><p>1. Choose a program</p>\n'
                '<label><input type="radio" name="prog" value="tblastx" checked> TBLASTX</label>\n'
                '<label><input type="radio" name="prog" value="blastn"> BLASTN (nucleotide)</label>\n'
                '<input type="submit" value="Next"></form>')

    def step2(self, request: Request) -> str:
        program = arg(request, "prog")
        if program not in ("blastn", "tblastx"):
            raise Problem(400, "Choose a program first.")
        return ('<form action="run" method="post" enctype="multipart/form-data">'
                f'<input type="hidden" name="prog" value="{program}"><p>2. Your sequence</p>\n'
                '<input type="file" name="upload"> or <input type="text" name="data" size="80">\n'
                '<input type="submit" value="Run"></form>')

    def run(self, request: Request) -> str | bytes:
        expect_method(request, "POST")
        text = arg(request, "data") or arg(request, "upload")
        if arg(request, "prog") != "blastn":
            return "<p>TBLASTX jobs are answered by mail.</p>"
        return report_page(request, *nucleotide_query(text), "BLASTN")


class Failing(Service):
    """Every probe answered with HTTP 500."""

    title = "BLAST (maintenance)"
    pages = {"": "start", "run": "run"}

    def start(self, request: Request) -> str:
        return ('<form action="run" method="post"><textarea name="sequence"></textarea>'
                '<input type="submit" value="BLAST"></form>')

    def run(self, request: Request) -> str:
        raise Problem(500, "Internal Server Error")


class Endless(Service):
    """Every answer is another "still running, view the results" page, at a new URL."""

    title = "BLAST (slow)"
    pages = {"": "start", "run": "run", "results": "run"}

    def start(self, request: Request) -> str:
        return ('<form action="run" method="post"><textarea name="sequence"></textarea>'
                '<input type="submit" value="BLAST"></form>')

    def run(self, request: Request) -> str:
        step = arg(request, "step", "0")
        step = int(step) if step.isdigit() else 0
        return f'<p>Still running.</p><p><a href="results?step={step + 1}">View results</a></p>'


class Offsite(Service):
    """A BLAST form whose action is on another host (a closed port on loopback)."""

    title = "BLAST portal"

    def start(self, request: Request) -> str:
        return ('<form action="http://127.0.0.2:9/blast" method="post"><textarea name="sequence"></textarea>'
                '<input type="submit" value="BLAST"></form>')


class Huge(Service):
    """A BLAST form answered with 10 MB of HTML."""

    title = "BLAST mirror"
    pages = {"": "start", "search": "search"}

    def start(self, request: Request) -> str:
        return ('<form action="search" method="get">\n<textarea name="sequence" rows="6" cols="60"></textarea>\n'
                '<input type="submit" value="BLAST"></form>')

    def search(self, request: Request) -> bytes:
        return b"<html><body><pre>" + b"Query  1  ACGTACGTAC  10\n" * (10 * 1024 * 1024 // 25) + b"</pre>"


class BrowseGenomes(Service):
    """A form with selects and radios only: nothing to type a sequence into."""

    title = "Browse genomes"
    pages = {"": "start", "list": "listing"}

    def start(self, request: Request) -> str:
        return ('<form action="list" method="get">\n<select name="organism"><option>Human</option><option>Mouse'
                '</option><option>Yeast</option></select>\n<input type="radio" name="view" value="table" checked> '
                'Table <input type="radio" name="view" value="list"> List\n<input type="submit" value="Browse"></form>')

    def listing(self, request: Request) -> str:
        organism = escape(arg(request, "organism", "Human"))
        return "<ul>" + "".join(f"<li>{organism} {part}</li>" for part in ("chromosome 1", "mitochondrion")) + "</ul>"


class Login(Service):
    title = "Sign in"
    pages = {"": "start", "login": "login"}

    def start(self, request: Request) -> str:
        return ('<form action="login" method="post">\n<label>Username <input name="username"></label>\n'
                '<label>Password <input type="password" name="password"></label>\n'
                '<input type="submit" value="Log in"></form>')

    def login(self, request: Request) -> str:
        expect_method(request, "POST")
        return "<p>Invalid username or password.</p>"


class Contact(Service):
    title = "Contact us"
    pages = {"": "start", "send": "send"}

    def start(self, request: Request) -> str:
        return ('<form action="send" method="post">\n<p>Name <input name="name"> E-mail <input type="email" '
                'name="email"></p>\n<p>Subject <input name="subject"></p>\n<p>Message<br><textarea name="message" '
                'rows="8" cols="60"></textarea></p>\n<input type="submit" value="Send"></form>')

    def send(self, request: Request) -> str:
        expect_method(request, "POST")
        return "<p>Thank you for your message. We will answer within two working days.</p>"


class About(Service):
    title = "About BLAST"

    def start(self, request: Request) -> str:
        return ("<p>BLAST finds regions of similarity between biological sequences: nucleotide sequences "
                "(blastn) and protein sequences (blastp). Paste a sequence such as ACGTTGCA into one of our "
                'services.</p>\n<p><a href="/blastn-get/">Nucleotide BLAST</a> | '
                '<a href="/blastp-get/">Protein BLAST</a></p>')


class Broken(Service):
    """A BLAST-looking form whose action fails."""

    title = "BLAST (maintenance)"
    pages = {"": "start", "search": "search"}

    def start(self, request: Request) -> str:
        return ('<form action="search" method="get">\n<textarea name="sequence" rows="6" cols="60"></textarea>\n'
                '<input type="submit" value="BLAST"></form>')

    def search(self, request: Request) -> str:
        raise Problem(500, "Internal Server Error")


class KeywordSearch(Service):
    """A search engine over ten documents (servicekit.DOCUMENTS): up to five results, each a link
    and a snippet holding the query's words, or "No results"; ``answers=False``: always "No results"."""

    pages = {"": "start", "results": "results"}

    def __init__(self, method: str = "GET", field: str = "q", answers: bool = True, echo: bool = False) -> None:
        super().__init__()
        self.method, self.field, self.answers, self.echo = method, field, answers, echo
        self.title = "Document search" if answers else "Archive lookup"

    def start(self, request: Request) -> str:
        languages = ""
        if self.method == "POST":
            languages = ('<select name="lang"><option value="any">Any language</option><option value="en">English'
                         '</option><option value="de">German</option><option value="fr">French</option></select>\n')
        return (f'<form action="results" method="{self.method.lower()}">\n<input type="text" name="{self.field}" '
                f'size="40">\n{languages}<input type="submit" value="Search"></form>')

    def results(self, request: Request) -> str:
        expect_method(request, self.method)
        query = arg(request, self.field)
        found = search_results(query) if self.answers else []
        if self.echo and query.strip():  # five "results" made of whatever was asked
            found = [(200 + n, f"Page {n + 1}", f"... everything about {query} ...") for n in range(5)]
        if not found:
            return f"<p>No results for <b>{escape(query)}</b>.</p>"
        items = "".join(f'<li><a href="/doc/{doc}">{escape(title)}</a>\n<p class="snippet">{escape(snippet)}</p></li>\n'
                        for doc, title, snippet in found)
        return f"<p>Results 1-{len(found)} for <b>{escape(query)}</b></p>\n<ol>\n{items}</ol>"


class Hostile(Service):
    title = "BLAST mirror"
    pages = {"": "start", "search": "search"}

    def __init__(self) -> None:
        super().__init__()
        self.body: bytes | None = None

    def start(self, request: Request) -> str:
        return ('<form action="search" method="get">\n<textarea name="sequence" rows="6" cols="60"></textarea>\n'
                '<input type="submit" value="BLAST"></form>')

    def search(self, request: Request) -> bytes:
        if self.body is None:
            self.body = hostile_body()
        return self.body


class Documents(Service):
    """``/doc/N`` and ``/entrez/ACC``: what result pages link to."""

    def render(self, request: Request) -> bytes:
        request.setHeader(b"Content-Type", b"text/html; charset=utf-8")
        key = escape(b"/".join(request.postpath).decode("utf-8", "replace"))
        return html_page(f"Record {key}", f"<p>Record {key}: a document about sequences and searching.</p>")


@dataclass(frozen=True)
class Listing:
    name: str  # its path prefix
    build: Callable[[], Resource]
    member_of: str | None  # the service class it belongs to
    listed: bool = True  # offered as a start URL (the hostile and robots-excluded ones are not)


def scripted(name: str) -> Callable[[], Resource]:
    """A service of webrace.demo.scripted, by name."""
    return getattr(scripted_services, name)


SERVICES = (
    Listing("blastn-get", SimpleBlast, "nucleotide_blast"),
    Listing("blastn-post", ComplexBlast, "nucleotide_blast"),
    Listing("blastn-multipart", MultipartBlast, "nucleotide_blast"),
    Listing("blastn-format", FormatBlast, "nucleotide_blast"),
    Listing("blastn-job", JobBlast, "nucleotide_blast"),
    Listing("blastn-nohits", NoHitsBlast, "nucleotide_blast"),
    Listing("blastn-db", DatabaseBlast, "nucleotide_blast"),
    Listing("blastn-options", OptionBlast, "nucleotide_blast"),
    Listing("blastn-queue", QueueBlast, "nucleotide_blast"),
    Listing("blastn-wizard", WizardBlast, "nucleotide_blast"),
    Listing("blastp-get", lambda: SimpleBlast("BLASTP"), "protein_blast"),
    Listing("blastp-post", lambda: ComplexBlast("BLASTP"), "protein_blast"),
    Listing("browse", BrowseGenomes, None),
    Listing("login", Login, None),
    Listing("contact", Contact, None),
    Listing("about", About, None),
    Listing("broken", Broken, None),
    Listing("search-get", KeywordSearch, "keyword_search"),
    Listing("search-post", lambda: KeywordSearch("POST", "query"), "keyword_search"),
    Listing("search-none", lambda: KeywordSearch(answers=False), None),
    Listing("search-echo", lambda: KeywordSearch(echo=True), None),
    Listing("scripted-blastn", scripted("ScriptedBlast"), "nucleotide_blast"),
    Listing("scripted-news", scripted("ScriptedNews"), None),
    Listing("hostile", Hostile, None, listed=False),
    Listing("failing", Failing, None, listed=False),
    Listing("endless", Endless, None, listed=False),
    Listing("offsite", Offsite, None, listed=False),
    Listing("scripted-offsite", scripted("ScriptedOffsite"), None, listed=False),
    Listing("huge", Huge, None, listed=False),
    Listing("private", SimpleBlast, None, listed=False),
    Listing("robots-form", RobotsForm, None, listed=False),
)


def _blastplus_listings() -> tuple[Listing, ...]:
    """The services that run the real BLAST+ (webrace.demo.blastplus), when it is installed."""
    import shutil  # here, so that this addition stays one block

    if not (shutil.which("blastn") and shutil.which("makeblastdb")):
        return ()

    def build(html: bool) -> Resource:
        return BlastPlus(html=html)

    return (Listing("blastplus-text", lambda: build(False), "nucleotide_blast"),
            Listing("blastplus-html", lambda: build(True), "nucleotide_blast"))


SERVICES += _blastplus_listings()


class Static(Resource):
    isLeaf = True

    def __init__(self, body: bytes, content_type: bytes) -> None:
        super().__init__()
        self.body, self.content_type = body, content_type

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"Content-Type", self.content_type)
        return self.body


class HitLog(Resource):
    """``/__hits`` (the log as JSON) and ``/__reset`` (clear it)."""

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


def build_site() -> LoggingSite:
    hits: list[dict] = []
    root = Resource()
    links = "".join(f'<li><a href="/{s.name}/">{s.name}</a></li>\n' for s in SERVICES)
    root.putChild(b"", Static(html_page("DynaBot test services", f"<ul>\n{links}</ul>"), b"text/html; charset=utf-8"))
    root.putChild(b"robots.txt", Static(ROBOTS_TXT, b"text/plain"))
    root.putChild(b"__hits", HitLog(hits, clear=False))
    root.putChild(b"__reset", HitLog(hits, clear=True))
    root.putChild(b"doc", Documents())
    root.putChild(b"entrez", Documents())
    for service in SERVICES:
        root.putChild(service.name.encode(), service.build())
    return LoggingSite(root, hits)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m webrace.demo.services",
                                     description="DynaBot's local services on 127.0.0.1, until Ctrl-C.")
    parser.add_argument("--port", type=int, default=0, help="0 (default): any free port")
    parser.add_argument("--seeds", default=SEEDS, metavar="FILE",
                        help=f"write the start pages here, one per line (default: {SEEDS}; '' for none); "
                             "removed when the services stop, as their addresses are")
    args = parser.parse_args(argv)
    # SIGTERM while they start ends them as Ctrl-C does, their temporary directories (the BLAST
    # databases) and seeds file removed; once they run, the reactor's own handlers stop them
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        serve(args.port, Path(args.seeds) if args.seeds else None)
    except KeyboardInterrupt:
        pass


def serve(port_number: int, seeds: Path | None) -> None:
    """The services on 127.0.0.1 until Ctrl-C or SIGTERM, announced on standard output."""
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
    port = reactor.listenTCP(port_number, build_site(), interface=HOST)
    base = f"http://{HOST}:{port.getHost().port}"
    print(f"{base}/  DynaBot's local services (Ctrl-C stops them)", flush=True)  # first line: read by Services
    try:
        for line in announce(base, seeds):
            print(line)
        sys.stdout.flush()
        reactor.run()  # until Ctrl-C or SIGTERM
    finally:  # its start pages name this run's port: nothing is left behind that points nowhere
        if seeds is not None:
            seeds.unlink(missing_ok=True)


def announce(base: str, seeds: Path | None) -> list[str]:
    """Every listed start page with its class, and the seeds file written for them."""
    listed = [s for s in SERVICES if s.listed]
    lines = [f"  {base}/{s.name}/  {s.member_of or '(member of no class)'}" for s in listed]
    if seeds is not None:
        seeds.write_text("".join(f"{base}/{s.name}/\n" for s in listed), encoding="utf-8")
        lines += [f"seeds: {seeds.resolve()} ({len(listed)} start pages)",
                  f"From the WebRACE repository: scrapy crawl dynabot -a scd=serviceclasses/nucleotide_blast.xml "
                  f"-a seeds={seeds.resolve()} -s WEBRACE_DYNABOT_MAX_POSTS_PER_SITE=100 -O services.jsonl"]
    return lines


# ---------------------------------------------------------------------------------------------
# The client side: start, address, inspect, stop
# ---------------------------------------------------------------------------------------------


def local_opener() -> urllib.request.OpenerDirector:
    """A urllib opener that ignores proxy settings: these services are on 127.0.0.1."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Services:
    """The services in a subprocess on 127.0.0.1 and a free port: ``with Services() as s: ...``."""

    def __init__(self, start_timeout: float = 30.0) -> None:
        self.base = ""
        self.start_timeout = start_timeout
        self._process: subprocess.Popen | None = None
        self._stderr = None

    def start(self) -> Services:
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen([sys.executable, "-m", "webrace.demo.services", "--port", "0", "--seeds", ""],
                                         stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        ready, _, _ = select.select([self._process.stdout], [], [], self.start_timeout)
        line = self._process.stdout.readline().strip() if ready else ""
        if not line.startswith(f"http://{HOST}:"):
            self.stop()
            raise RuntimeError(f"the DynaBot services did not start: {line or 'no address printed'}")
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

    def __enter__(self) -> Services:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def url(self, name: str) -> str:
        """A service's start URL by name (``"blastn-get"``), or any path (``"/robots.txt"``)."""
        if any(s.name == name for s in SERVICES):
            return f"{self.base}/{name}/"
        return f"{self.base}/{name.lstrip('/')}"

    @property
    def members(self) -> dict[str, list[str]]:
        """Service class -> the start URLs of its members."""
        return {c: [self.url(s.name) for s in SERVICES if s.listed and s.member_of == c] for c in CLASSES}

    @property
    def non_members(self) -> dict[str, list[str]]:
        """Service class -> start URLs of services with a form or look that are not its members."""
        return {c: [self.url(s.name) for s in SERVICES if s.listed and s.member_of != c] for c in CLASSES}

    def hits(self) -> list[dict]:
        """Every request the server has received since the start or the last ``reset``."""
        with local_opener().open(f"{self.base}/__hits", timeout=30) as answer:
            return json.loads(answer.read())

    def reset(self) -> None:
        with local_opener().open(f"{self.base}/__reset", timeout=30) as answer:
            answer.read()


if __name__ == "__main__":
    main()
