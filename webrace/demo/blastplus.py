"""DynaBot's local services in front of the REAL NCBI BLAST+ ``blastn``.

``BlastPlus()`` is a nucleotide BLAST service like those of ``webrace.demo.services`` (whose
``Service`` it extends), but its reports are not written by hand: at construction it builds
a small nucleotide database with ``makeblastdb`` in a temporary directory (from ``FASTA``
below), and a POST of its form runs ``blastn`` on the query against it, with ``-outfmt 0``
(the pairwise report) shown inside ``<pre>`` in a page of the service; ``BlastPlus(html=True)``
answers with the ``-html`` document BLAST+ writes itself (its record links to
www.ncbi.nlm.nih.gov turned into this server's ``/entrez/``, so that nothing points off
127.0.0.1).

The form: a textarea ``QUERY`` (FASTA or a bare sequence, A/C/G/T/N, at most
``MAX_LETTERS`` bases), a select ``DATABASE`` (one database), a select ``PROGRAM``
(``megablast``, the default, or ``blastn``: BLAST+'s ``-task``), a text field ``EXPECT``
(10) and a submit button. ``blastn`` runs without a shell, with the query on its standard
input, under a timeout (``TIMEOUT``), in a thread (at most ``SLOTS`` at a time), so a search
never holds up the server's other pages. A query that is not a nucleotide sequence gets an
error page ("Invalid nucleotide sequence"), a too long one HTTP 400.

The database holds two EST-like records that contain, with a few substitutions and a
deletion (one on the minus strand), pieces of the sequences seed 004's nucleotide BLAST
class probes with, as a real nucleotide collection holds them, and two unrelated records:
the class's probes find hits, other DNA mostly "***** No hits found *****".

``webrace.demo.services`` lists ``blastplus-text`` and ``blastplus-html`` (members of
``nucleotide_blast``) only when ``blastn`` and ``makeblastdb`` are on PATH (Debian:
``apt-get install ncbi-blast+``).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html import escape
from pathlib import Path

from twisted.internet.defer import DeferredSemaphore
from twisted.internet.threads import deferToThread
from twisted.python.failure import Failure
from twisted.web.server import NOT_DONE_YET, Request

from webrace.demo.servicekit import Problem, Service, arg, expect_method, html_page, nucleotide_query

PROGRAMS = ("blastn", "makeblastdb")
MAX_LETTERS = 10_000  # bases of a query
MAX_TEXT = 4 * MAX_LETTERS  # characters of the submitted text (FASTA definition line, whitespace)
TIMEOUT = 30.0  # seconds a blastn (or makeblastdb) may take
SLOTS = 2  # blastn processes at a time, per service
TASKS = {"megablast": "megablast (highly similar sequences)", "blastn": "blastn (somewhat similar sequences)"}
DATABASE = ("demo_nt", "Demo nucleotide collection (4 sequences)")
NCBI = ("https://www.ncbi.nlm.nih.gov/", "http://www.ncbi.nlm.nih.gov/")

FASTA = """\
>gi|7000101|gb|DQ700101.1| Synthetic construct EST clone 101, mRNA sequence
AGACTTTCAAAGATATGCTGGGTAGAGGTCGAGGTTATTATTTGTTACCAATTCTCATTG
TGTTTCGGAACTGCATCAGTAATTTTAATAGAGACTCTTAGTGGTTATCAACAACCGGTC
AGTTGTTTTTTTTTTTTTCCACACTGCTCTCTGGATTCGAACCTAGTGAATTCTGGGCTC
AGTCCTCCTCCATCTCTTTCCTGATCCAGTCCACGTAGTTGAGCACTTTGGTGTAGAAGC
ATAGCCCCTGCTGCACCCGATGCCCCAGGGCACGATGCCCGTGGCCACCCAGCGATCAGT
GTTCGGGTCCCTTACTGGAAAAACGCCCCCTTGCGTTTTAGGTATGTCTTAGTGACTCTA
AATACCAAGGCAGTCCTCGATCCGTTCCT
>gi|7000102|gb|DQ700102.1| Synthetic construct EST clone 102, mRNA sequence
AATAAGGAATGGTGATTCCCTGTCATACCAATCTACCCCCTGTTATGCGCGTTTGTCGTT
AGACCAATGTCAGCGCAGCGCCGGCACATGCTAGCAGGAAGAACAGAGGGGGAAGCAGTT
GGGAGGTAAGACCCATTAATAGGTGTCGATTTGCAGTGACAATGTGAGGCAATTAGTTGC
AGATCAAGCAGGAGGCGGAATGTAAACAGAAGGTATGCTTAGGTGGAT
>ref|XM_700103.1| Synthetic construct uncharacterized gene, mRNA
AGGGAGTGAGCAACAAACGGATCGTTTCTCCCATGCCAAGTTGGCACAGGGAACTACCTG
CGGCGGTTTGCCTCTAGTACAGGGCAACGATTCAACTGGGACCGGGGCTCATTGCACGCC
AAAGAGGCCCCAGTAATGGAGTTACGTGAAATGGCCGTGGTTGCCTCGGTTCCTCTGGAG
GTGCGCGCAGGTTTAGTGATCTGGATCAGGCGTTTGAACAGGACTGGACAACGCTCCGAT
CAAGTACCTGGGGTGTGGATCATGGTCGGTGCATAGTAGTGGGCACGTACATCCTCCGTC
GGTCCCCCAAGGCCGGCTCCACCTTAGCGATTCGCATAAAGGGACCATTCCCCTCGCTTT
GCGTTACCAAGCACCTCTACGGGTATTGGTCACCGTTAGGATTGAGGAAAATATTTACGC
>XR_700104.1 Synthetic construct non-coding RNA
AATACGAAAAGCGTCGTCTCGTATCCTCATTTATCTATCGCGGTAGCAGCACTTAATTAC
CAGCGGAGCACATAGTACTAGACAGCAGATGACCTAGCTTACAATTATCCCCCGTGCTAA
GACCTCGCTACATATTGGAAGCATCGCGAAGCTACTCTAACAGCTGATGCTATAACGTAT
GTTGGTTTGGCAACCGTCGCACTCGTCGTGGTCCGACGCTCTTTAGAGGTCGGGTCATTT
GCTGAACCCTTTCTCGAAAACTATGATCGGAAAGCTTAACTGCAAGCCTTATCAATTATT
ATTGAATCTAGCTAGCACGGTACGATAGGTGCCTGAGTGTGCTCGGGGACACGGAGTTTT
AGTTGTGAGTGGTAGTTAAG
"""


def available() -> bool:
    """True when the BLAST+ programs these services run are on PATH."""
    return all(shutil.which(program) for program in PROGRAMS)


def program(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found on PATH: install NCBI BLAST+ (Debian: apt-get install ncbi-blast+)")
    return found


class BlastPlus(Service):
    """A nucleotide BLAST form answered by the real ``blastn``: ``-outfmt 0`` inside ``<pre>``,
    or (``html=True``) BLAST+'s own ``-html`` document."""

    pages = {"": "start"}  # "search" is answered asynchronously (render)

    def __init__(self, html: bool = False) -> None:
        super().__init__()
        self.html = html
        self.title = "BLAST+ nucleotide search" + (" (HTML report)" if html else "")
        self.blastn = program("blastn")
        self.slots = DeferredSemaphore(SLOTS)
        self._directory = tempfile.TemporaryDirectory(prefix="webrace-blastplus-")  # removed with the service
        self.database = Path(self._directory.name) / DATABASE[0]
        fasta = Path(self._directory.name) / f"{DATABASE[0]}.fasta"
        fasta.write_text(FASTA, encoding="ascii")
        done = subprocess.run([program("makeblastdb"), "-in", str(fasta), "-dbtype", "nucl", "-parse_seqids",  # noqa: S603 - BLAST+ on PATH, our arguments
                               "-title", DATABASE[1], "-out", str(self.database)],
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"makeblastdb failed ({done.returncode}): {done.stderr.strip()}")

    def start(self, request: Request) -> str:
        tasks = "".join(f'<option value="{task}"{" selected" if task == "megablast" else ""}>{escape(label)}</option>'
                        for task, label in TASKS.items())
        return f"""<p>Search the {escape(DATABASE[1])} with NCBI BLAST+.</p>
<form action="search" method="post">
<p><label for="query">Enter a nucleotide query (FASTA or a bare sequence, at most {MAX_LETTERS} bases)</label><br>
<textarea id="query" name="QUERY" rows="8" cols="70"></textarea></p>
<p>Database <select name="DATABASE"><option value="{DATABASE[0]}">{escape(DATABASE[1])}</option></select>
Program <select name="PROGRAM">{tasks}</select>
Expect threshold <input type="text" name="EXPECT" value="10" size="6"></p>
<p><input type="submit" value="BLAST"></p>
</form>"""

    def render(self, request: Request) -> bytes | int:
        if request.postpath != [b"search"]:
            return super().render(request)
        request.setHeader(b"Content-Type", b"text/html; charset=utf-8")
        try:
            command, fasta = self.command(request)
        except Problem as problem:
            return self.problem(request, problem)
        finished: list[bool] = []
        request.notifyFinish().addBoth(finished.append)  # the client may go away while BLAST runs

        def answer(body: bytes) -> None:
            if not finished:
                request.write(body)
                request.finish()

        def failed(failure: Failure) -> None:
            problem = failure.value if failure.check(Problem) else Problem(500, "BLAST failed.")
            if not finished:
                request.write(self.problem(request, problem))
                request.finish()

        self.slots.run(deferToThread, self.run, command, fasta).addCallbacks(answer, failed)
        return NOT_DONE_YET

    @staticmethod
    def problem(request: Request, problem: Problem) -> bytes:
        request.setResponseCode(problem.status)
        return html_page("Error", f'<p class="error">{escape(str(problem))}</p>')

    def command(self, request: Request) -> tuple[list[str], str]:
        """The blastn command line and the FASTA it reads, from the form; Problem for a bad form."""
        expect_method(request, "POST")
        text = arg(request, "QUERY")
        if len(text) > MAX_TEXT:
            raise Problem(400, f"The query is too long: at most {MAX_LETTERS} bases.")
        name, letters = nucleotide_query(text)
        if len(letters) > MAX_LETTERS:
            raise Problem(400, f"The query is too long: {len(letters)} bases, at most {MAX_LETTERS}.")
        if arg(request, "DATABASE", DATABASE[0]) != DATABASE[0]:
            raise Problem(400, f"Unknown database; this server searches {DATABASE[0]}.")
        task = arg(request, "PROGRAM", "megablast")
        if task not in TASKS:
            raise Problem(400, f"Unknown program {task!r}: choose {' or '.join(TASKS)}.")
        try:
            expect = float(arg(request, "EXPECT", "10") or "10")
        except ValueError:
            raise Problem(400, "The Expect threshold must be a number.") from None
        if not 1e-200 <= expect <= 1000:
            raise Problem(400, "The Expect threshold must be between 1e-200 and 1000.")
        command = [self.blastn, "-task", task, "-db", str(self.database), "-outfmt", "0", "-evalue", f"{expect:g}",
                   "-max_target_seqs", "50"]
        if self.html:
            command.append("-html")
        name = "".join(c for c in name if c.isprintable())[:200] or "query"
        return command, f">{name}\n{letters}\n"

    def run(self, command: list[str], fasta: str) -> bytes:
        """Run blastn (in a thread) and make the page of its report."""
        try:
            done = subprocess.run(command, input=fasta,  # noqa: S603 - blastn, our arguments, no shell
                                  capture_output=True, text=True, timeout=TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise Problem(503, f"The search took longer than {TIMEOUT:.0f} seconds and was stopped.") from None
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise Problem(500, f"BLAST failed: {reason}")
        report = done.stdout
        if self.html:
            for prefix in NCBI:
                report = report.replace(prefix, "/entrez/")
            return report.encode()
        return html_page(self.title, f"<p>Results of {escape(command[2])} against {escape(DATABASE[1])}</p>\n"
                                     f"<pre>\n{escape(report)}</pre>\n<p><a href=\"./\">New search</a></p>")
