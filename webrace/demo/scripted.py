"""Local test services whose forms exist only once their scripts ran (DynaBot's browser mode).

Served with the others by ``python -m webrace.demo.services`` (``SERVICES`` there lists them):

- ``ScriptedBlast`` (``scripted-blastn``): a nucleotide BLAST service whose start page has no
  form in its HTML. ``app.js`` asks ``databases`` for the database list, then builds the form
  (a textarea ``seq``, a select ``db``, a "BLAST" button); submitting it ``fetch``-es
  ``api`` with a JSON body and writes the JSON answer's report into a ``<pre>`` of the page,
  the database searched above it (an error into a ``<p class="error">``). Without a browser
  the form is never seen; a plain GET of the page with ``?seq=...`` gets the start page again.
- ``ScriptedNews`` (``scripted-news``): a look-alike about BLAST whose script shows a tip,
  filters headlines with a search box that belongs to no form, and reports the visit to
  another host (``http://127.0.0.2:9/``, where nothing listens): no form, before or after
  its scripts ran.
- ``ScriptedOffsite`` (``scripted-offsite``): a script builds a BLAST form whose action is on
  another host (``http://127.0.0.2:9/blast``, POST): a polite prober never sends it.
"""

from __future__ import annotations

import json

from twisted.web.server import Request

from webrace.demo.servicekit import Problem, Service, blast_report, expect_method, nucleotide_query, report_text

OFFSITE = "http://127.0.0.2:9"  # loopback, a closed port: what a page must not reach

DATABASES = (("nt", "Nucleotide collection (nt)"), ("refseq_rna", "Reference RNA sequences"),
             ("est", "Expressed sequence tags"))

SCRIPTED_BLAST_JS = """'use strict';
// The search form is built once the database list has arrived.
document.addEventListener('DOMContentLoaded', () => {
  const app = document.getElementById('app');
  fetch('databases').then(answer => answer.json()).then(databases => {
    const form = document.createElement('form');
    form.id = 'search';
    const label = document.createElement('label');
    label.htmlFor = 'seq';
    label.textContent = 'Nucleotide query sequence (FASTA or plain)';
    const seq = document.createElement('textarea');
    seq.id = 'seq'; seq.name = 'seq'; seq.rows = 8; seq.cols = 70;
    const db = document.createElement('select');
    db.name = 'db';
    for (const [value, text] of databases) db.add(new Option(text, value));
    const go = document.createElement('button');
    go.type = 'submit'; go.textContent = 'BLAST';
    for (const part of [label, document.createElement('br'), seq, document.createElement('br'), db, go]) {
      form.appendChild(part);
    }
    app.replaceChildren(form);
    form.addEventListener('submit', event => {
      event.preventDefault();
      const report = document.getElementById('report'), problem = document.getElementById('problem');
      const searched = document.getElementById('searched');
      report.textContent = searched.textContent = ''; problem.textContent = 'Searching...';
      fetch('api', {method: 'POST', headers: {'Content-Type': 'application/json'},
                    body: JSON.stringify({seq: seq.value, db: db.value})})
        .then(answer => answer.json())
        .then(result => {
          problem.textContent = result.error || '';
          searched.textContent = result.database ? `Database: ${result.database}` : '';
          report.textContent = result.report || '';
        })
        .catch(() => { problem.textContent = 'The search service could not be reached.'; });
    });
  });
});
"""

NEWS_JS = f"""'use strict';
const tips = ['Megablast is fastest for nearly identical sequences.',
              'Use blastn for somewhat similar nucleotide sequences.',
              'Mask low-complexity regions to avoid spurious hits.'];
document.getElementById('tip').textContent = tips[new Date().getDate() % tips.length];
const filter = document.getElementById('filter');
filter.addEventListener('input', () => {{
  for (const item of document.querySelectorAll('#news li')) {{
    item.hidden = !item.textContent.toLowerCase().includes(filter.value.toLowerCase());
  }}
}});
// a visitor counter on another host
fetch('{OFFSITE}/collect?page=' + encodeURIComponent(location.pathname), {{mode: 'no-cors'}}).catch(() => {{}});
"""

OFFSITE_JS = f"""'use strict';
const form = document.createElement('form');
form.method = 'post';
form.action = '{OFFSITE}/blast';
const seq = document.createElement('textarea');
seq.name = 'sequence'; seq.rows = 8; seq.cols = 70;
const program = document.createElement('select');
program.name = 'program';
program.add(new Option('blastn', 'blastn'));
const go = document.createElement('input');
go.type = 'submit'; go.value = 'Run BLAST';
form.append('Query sequence', document.createElement('br'), seq, document.createElement('br'), program, go);
document.getElementById('app').appendChild(form);
"""


def javascript(request: Request, code: str) -> bytes:
    request.setHeader(b"Content-Type", b"text/javascript; charset=utf-8")
    return code.encode()


def json_answer(request: Request, value: object, status: int = 200) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"Content-Type", b"application/json")
    return json.dumps(value).encode()


class ScriptedBlast(Service):
    """(a) The form is built by ``app.js``; submitted with ``fetch`` to a JSON API."""

    title = "Nucleotide BLAST (interactive)"
    pages = {"": "start", "app.js": "script", "databases": "databases", "api": "api"}

    def start(self, request: Request) -> str:
        return ('<div id="app"><p>Loading the search form...</p>\n'
                "<noscript><p>This service needs JavaScript.</p></noscript></div>\n"
                '<p id="problem" class="error"></p>\n<p id="searched"></p>\n<pre id="report"></pre>\n'
                '<script src="app.js"></script>')

    def script(self, request: Request) -> bytes:
        return javascript(request, SCRIPTED_BLAST_JS)

    def databases(self, request: Request) -> bytes:
        expect_method(request, "GET")
        return json_answer(request, [list(pair) for pair in DATABASES])

    def api(self, request: Request) -> bytes:
        if request.method != b"POST":
            request.setHeader(b"Allow", b"POST")
            return json_answer(request, {"error": "Send the query with POST."}, 405)
        try:
            query = json.loads(request.content.read() or b"null")
        except ValueError:
            query = None
        if not isinstance(query, dict):
            return json_answer(request, {"error": "The query must be a JSON object."}, 400)
        database = dict(DATABASES).get(query.get("db"))
        if database is None:
            return json_answer(request, {"error": "Unknown database."})
        try:
            name, letters = nucleotide_query(str(query.get("seq") or ""))
        except Problem as problem:
            return json_answer(request, {"error": str(problem)})
        report = report_text(blast_report(name, letters, "BLASTN"))
        return json_answer(request, {"database": database, "report": report})


class ScriptedNews(Service):
    """(b) Scripts, a search box outside any form, no form."""

    title = "BLAST news and tips"
    pages = {"": "start", "news.js": "script"}

    def start(self, request: Request) -> str:
        headlines = ("New nucleotide databases for BLAST searches", "Sequence submission portal upgraded",
                     "How to read a BLAST report")
        items = "".join(f"<li>{text}</li>" for text in headlines)
        return ('<p>Tip of the day: <span id="tip"></span></p>\n'
                '<p><input id="filter" type="search" placeholder="Filter the news"></p>\n'
                f'<ul id="news">{items}</ul>\n<script src="news.js"></script>')

    def script(self, request: Request) -> bytes:
        return javascript(request, NEWS_JS)


class ScriptedOffsite(Service):
    """(c) A script-built BLAST form whose action is on another host."""

    title = "BLAST gateway"
    pages = {"": "start", "form.js": "script"}

    def start(self, request: Request) -> str:
        return '<div id="app"></div>\n<script src="form.js"></script>'

    def script(self, request: Request) -> bytes:
        return javascript(request, OFFSITE_JS)
