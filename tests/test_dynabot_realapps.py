"""DynaBot against real applications (holdout/realapps): their own access logs say what it sent.
Skipped, with the reason, when the apps are not installed (python holdout/realapps/install.py)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import Project

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "holdout"))

from realapps.serve import RealApps, installed  # noqa: E402

APPS = ["django", "datasette", "isso", "omega"]
MISSING = [name for name in APPS if not installed(name)]
pytestmark = [pytest.mark.skipif(bool(MISSING), reason=f"real apps not installed: {', '.join(MISSING)} "
                                                       "(python holdout/realapps/install.py)"),
              pytest.mark.xdist_group("realapps")]
SCD = ROOT / "serviceclasses"


@pytest.fixture(scope="module")
def apps():
    with RealApps(APPS) as running:
        yield running


def crawl(project: Project, urls: list[str], scd: str, *extra: str) -> list[dict]:
    (project.root / "seeds.txt").write_text("\n".join(urls) + "\n")
    out = project.root / "out.jsonl"
    done = project.scrapy("crawl", "dynabot", "-a", f"scd={SCD / scd}.xml", "-a", "seeds=seeds.txt", "-O", str(out),
                          "-s", "DOWNLOAD_DELAY=0", "-s", "WEBRACE_DELAY_FACTOR=0", "-s", "LOG_LEVEL=INFO",
                          *extra, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("scd", ["keyword_search", "nucleotide_blast"])
def test_contact_sign_up_and_log_in_forms_are_never_submitted(apps, project, scd):
    """django-contact-form, django-registration and Django's log-in pages: the server's own log
    holds no POST, and each trace says which form was left alone and why."""
    pages = ["/contact/", "/accounts/register/", "/accounts/login/", "/admin/login/"]
    mark = apps.marks()["django"]
    items = crawl(project, [apps.running["django"].url(p) for p in pages], scd)
    assert apps.posts("django", mark) == {}  # the log is complete when the crawl has ended: gunicorn writes at once
    traces = {i["source"].split("/", 3)[3]: i for i in items if i["kind"] == "trace"}
    assert len(traces) == 4 and all(t["outcome"] == "no-match" and t["submissions"] == 0 for t in traces.values())
    assert traces["contact/"]["forms"][0]["left_alone"].startswith("a contact form: ")
    assert traces["accounts/register/"]["forms"][0]["left_alone"].startswith("a sign-up form: ")
    assert traces["accounts/login/"]["forms"][0]["left_alone"].startswith("a log-in form: ")
    assert "no form is a query" in traces["contact/"]["reason"]


def test_a_comment_widget_is_never_posted_to(apps, project):
    """Isso's demo page: its script builds the comment box; shown in the browser (when there is
    one), its own scripts' POSTs (a comment counter) are not sent either."""
    mark = apps.marks()["isso"]
    items = crawl(project, [apps.running["isso"].url("/demo/")], "keyword_search")  # gunicorn logs at once
    (trace,) = [i for i in items if i["kind"] == "trace"]
    assert trace["outcome"] in ("no-form", "no-match") and trace["submissions"] == 0
    assert apps.posts("isso", mark) == {}


def test_a_filter_form_is_probed_with_its_column_set_and_the_full_text_search_is_backed(apps, project):
    """Datasette: the table without full-text search is probed through its filter row with a
    column and "contains" (the server's log shows it); the table with it is a member whose claim
    its control probe backs ("0 rows where search matches ...")."""
    datasette = apps.running["datasette"]
    mark = apps.marks()["datasette"]
    items = crawl(project, [datasette.url("/packages/packages"), datasette.url("/packages_plain/packages")],
                  "keyword_search", "-a", "keywords=library")
    with datasette.log.open("rb") as log:  # uvicorn's own lines: "GET /packages_plain/packages?... HTTP/1.1"
        log.seek(mark)
        targets = re.findall(r'"GET (/packages_plain/packages\?\S+) HTTP', log.read().decode())
    filtered = [parse_qs(urlsplit(t).query) for t in targets if "_filter_value=library" in t]
    assert filtered and filtered[0]["_filter_column"] == ["description"] and filtered[0]["_filter_op"] == ["contains"]
    profiles = {i["source"]: i for i in items if i["kind"] == "profile"}
    fts = profiles[datasette.url("/packages/packages")]
    assert dict(fts["fields"])["_search"] == "library" and "0 rows" in fts["evidence"]["no_results"]
    assert apps.posts("datasette", mark) == {}


def test_a_search_page_that_shows_no_words_of_its_own_is_found_with_the_classs_further_values(apps, project):
    """Xapian Omega's query page (an index of the Python docs) shows only "Omega Search" and its
    own options: the class's value ("crawler") and the site's one word ("omega") find nothing,
    the class's next value does, and the nonsense probe's "No documents match" backs it."""
    items = crawl(project, [apps.running["omega"].url("/cgi-bin/omega/omega")], "keyword_search")
    trace = next(i for i in items if i["kind"] == "trace")
    assert trace["outcome"] == "match", trace
    tried = [step["why"] for step in trace["steps"] if not step["why"].startswith("control")]
    assert "P='omega' (a word of the site)" in tried[1] and "(the class's next value)" in tried[-1]
    profile = next(i for i in items if i["kind"] == "profile")
    assert "no documents match" in profile["evidence"]["no_results"].lower()
