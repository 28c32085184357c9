"""DynaBot end to end: `scrapy crawl dynabot` against local services (webrace.demo.services)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project

from webrace.demo.services import SERVICES, Services
from webrace.dynabot import browser
from webrace.dynabot.analyzer import plan_probes
from webrace.dynabot.forms import analyze_forms

# one worker runs this module (setup.cfg: --dist loadgroup): its module-wide set-up is paid once
pytestmark = pytest.mark.xdist_group("dynabot")

ROOT = Path(__file__).resolve().parent.parent
SCD = {name: str(ROOT / "serviceclasses" / f"{name}.xml") for name in ("nucleotide_blast", "protein_blast",
                                                                      "keyword_search")}
# one server stands in for many sites here: the per-site POST cap is the site's, not the test's
SETTINGS = ["-s", "DOWNLOAD_DELAY=0", "-s", "WEBRACE_DELAY_FACTOR=0", "-s", "TELNETCONSOLE_ENABLED=False",
            "-s", "LOG_LEVEL=INFO", "-s", "WEBRACE_DYNABOT_MAX_POSTS_PER_SITE=1000"]


@pytest.fixture(scope="module")
def services():
    with Services() as running:
        yield running


def browser_mode() -> str | None:
    """Whether the browser mode can run (None) or why not, decided when a crawl is about to run
    and passed to it (:func:`dynabot`): a Chromium installed while the suite runs (after this
    module was imported) changes what the crawl and its expectations both say, together."""
    return browser.available()


def findable(urls: list[str], no_browser: str | None) -> set[str]:
    """The members DynaBot can find here: those whose form a script builds need the browser mode."""
    return {url for url in urls if no_browser is None or "/scripted-" not in url}


DECIDE = "decided when the crawl starts"


def dynabot(project, seeds: list[str], scd: str, *extra: str,
            no_browser: str | None = DECIDE) -> tuple[object, list[dict]]:
    """A crawl with the browser mode on, or off when ``no_browser`` says why (pinned: the crawl
    does not decide it again; by default :func:`browser_mode` decides it now)."""
    if no_browser is DECIDE:
        no_browser = browser_mode()
    (project.root / "seeds.txt").write_text("\n".join(seeds) + "\n")
    out = project.root / "dynabot.jsonl"
    out.unlink(missing_ok=True)
    mode = ["-s", f"WEBRACE_DYNABOT_BROWSER={no_browser is None}"]
    done = project.scrapy("crawl", "dynabot", "-a", f"scd={SCD[scd]}", "-a", "seeds=seeds.txt", "-O", str(out),
                          *SETTINGS, *mode, *extra)
    items = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done, items


def by_source(items: list[dict], kind: str) -> dict[str, dict]:
    return {item["source"]: item for item in items if item["kind"] == kind}


def test_every_nucleotide_member_is_matched_with_how_to_query_it_and_no_lookalike_is(services, project):
    members = services.members["nucleotide_blast"]
    others = services.non_members["nucleotide_blast"]
    extra = [services.url("robots-form"), services.url("hostile"), "http://127.0.0.1:9/"]  # :9 refuses
    services.reset()
    no_browser = browser_mode()
    done, items = dynabot(project, members + others + extra, "nucleotide_blast", no_browser=no_browser)
    assert done.returncode == 0, done.stderr[-3000:]
    traces, profiles = by_source(items, "trace"), by_source(items, "profile")
    assert set(traces) == set(members + others + extra)  # one trace per source, whatever happened
    assert {url for url, t in traces.items() if t["outcome"] == "match"} == findable(members, no_browser) \
        == set(profiles)
    assert traces[services.url("about")]["outcome"] == "no-form"
    assert traces["http://127.0.0.1:9/"]["outcome"] == "error" and "start page" in traces["http://127.0.0.1:9/"]["reason"]
    assert traces[services.url("browse")]["outcome"] == "no-match"  # no text input: the form filter drops it
    assert traces[services.url("login")]["outcome"] == "no-match" and traces[services.url("login")]["probes"] == 0

    post = profiles[services.url("blastn-post")]
    fields = dict(post["fields"])
    assert post["arguments"]["sequence"] == "QUERY_DATA" and fields["PROGRAM"] == "blastn"
    assert fields["DATABASE"] in {"nt", "est", "htgs"} and post["button"]["value"] == "Search"
    assert post["form"]["method"] == "POST" and post["result_type"] == "SummaryPage"
    assert post["extracted"] and not post["empty"]
    assert profiles[services.url("blastn-multipart")]["form"]["enctype"] == "multipart/form-data"
    assert profiles[services.url("blastn-multipart")]["arguments"]["sequence"] == "seq_input"
    assert [s["vertex"] for s in profiles[services.url("blastn-format")]["states"]] == ["start", "format", "summary"]
    assert [s["vertex"] for s in profiles[services.url("blastn-job")]["states"]] == ["start", "running", "summary"]
    nohits = profiles[services.url("blastn-nohits")]
    assert nohits["empty"] and nohits["extracted"] == []
    assert dict(profiles[services.url("blastn-db")]["fields"])["db"] in {"nt", "est"}
    simple = profiles[services.url("blastn-get")]
    assert simple["form"]["method"] == "GET" and simple["probes"] == 2  # the probe, and its control probe
    assert simple["evidence"]["control"]["sequence"] != simple["arguments"] and simple["evidence"]["reason"]
    assert simple["user_arguments"] == ["sequence"]  # what a person fills in (user="true" in the SCD)
    assert all("Sbjct" in e["text"] or "Query" in e["text"] for e in simple["extracted"])

    robots = traces[services.url("robots-form")]
    assert robots["outcome"] == "no-match" and robots["skipped"].get("robots")
    assert not [h for h in services.hits() if h["path"].startswith("/private/")]  # robots.txt obeyed by probes
    hostile = traces[services.url("hostile")]  # 5 MB of near-matches: over the probe answers' size limit
    assert hostile["outcome"] == "error" and "over 4194304 bytes" in hostile["reason"]
    assert all(h["user_agent"].startswith("WebRACE/") for h in services.hits())
    assert not [h for h in services.hits() if h["path"].startswith("/login/") and h["method"] == "POST"]
    contact = traces[services.url("contact")]  # name, e-mail, message: never submitted, and the trace says why
    assert contact["outcome"] == "no-match" and contact["probes"] == 0
    assert contact["forms"][0]["left_alone"].startswith("a contact form: ")
    assert not [h for h in services.hits() if h["path"].startswith("/contact/") and h["method"] == "POST"]

    figures = json.loads((project.data / "last-dynabot.json").read_text())
    assert figures["matched"] == len(findable(members, no_browser)) and figures["sources"] == len(traces)
    assert "Number of matched sources" in done.stderr and "Number of probes" in done.stderr


@pytest.mark.parametrize("scd", ["protein_blast", "keyword_search"])
def test_other_service_classes_tell_their_members_from_lookalikes(services, project, scd):
    members = services.members[scd]
    others = [services.url(name) for name in ("blastn-get", "blastn-post", "contact", "search-none", "search-echo",
                                              "blastp-get", "search-get") if services.url(name) not in members]
    done, items = dynabot(project, members + others, scd)
    assert done.returncode == 0, done.stderr[-3000:]
    matched = {t["source"] for t in items if t["kind"] == "trace" and t["outcome"] == "match"}
    assert matched == set(members)
    if scd == "keyword_search":  # every word finds five results: so does a nonsense word, which blocks the claim
        echo = next(t for t in items if t["kind"] == "trace" and t["source"] == services.url("search-echo"))
        assert "that no control probe backed" in echo["reason"] and "nonsense probe" in echo["reason"]
        assert any(step["why"].startswith("control: keywords=") for step in echo["steps"])


def test_probe_budgets_are_respected(services, project):
    target = services.url("blastp-post")  # a large form that is not a nucleotide BLAST: every probe fails
    services.reset()
    done, items = dynabot(project, [target], "nucleotide_blast", "-s", "WEBRACE_DYNABOT_MAX_PROBES_PER_FORM=3")
    (trace,) = [i for i in items if i["kind"] == "trace"]
    sent = [h for h in services.hits() if h["path"] != "/blastp-post/" and h["path"].startswith("/blastp-post/")]
    assert trace["outcome"] == "no-match" and trace["probes"] == len(sent) == 3
    services.reset()
    done, items = dynabot(project, [services.url("blastn-format")], "nucleotide_blast",
                          "-s", "WEBRACE_DYNABOT_MAX_PROBES_PER_SOURCE=1")
    (trace,) = [i for i in items if i["kind"] == "trace"]
    assert trace["outcome"] == "no-match" and trace["probes"] == 1  # the format page is never submitted
    assert len([h for h in services.hits() if h["path"].startswith("/blastn-format/") and h["method"] == "POST"]) == 1


def test_linkhint_frontier_fetches_hinted_urls_first(services, project):
    services.reset()
    done, items = dynabot(project, [services.base + "/"], "nucleotide_blast", "-a", "frontier=linkhint",
                          "-a", "hints=blastn", "-a", "max_pages=60", "-s", "CONCURRENT_REQUESTS=1",
                          "-s", "WEBRACE_DYNABOT_MAX_REFRESH_WAIT=1")
    assert done.returncode == 0, done.stderr[-3000:]
    starts = [h["path"] for h in services.hits() if h["method"] == "GET" and h["path"].count("/") == 2
              and h["path"].endswith("/") and h["path"] != "/"]
    hinted = [i for i, path in enumerate(starts) if "blastn" in path]
    plain = [i for i, path in enumerate(starts) if "blastn" not in path]
    # every hinted start page (some twice: a browser shows the scripted one again), before any other
    assert {starts[i] for i in hinted} == {f"/{s.name}/" for s in SERVICES if s.listed and "blastn" in s.name}
    assert plain and max(hinted) < min(plain)
    assert {t["source"] for t in items if t["kind"] == "trace" and t["outcome"] == "match"} >= {
        services.url(name) for name in ("blastn-get", "blastn-post", "blastn-job")}


def test_randomwalk_frontier_finds_members_by_following_links(services, project):
    no_browser = browser_mode()
    done, items = dynabot(project, [services.base + "/"], "nucleotide_blast", "-a", "frontier=randomwalk",
                          "-a", "seed=7", "-a", "max_pages=40", "-s", "WEBRACE_DYNABOT_MAX_REFRESH_WAIT=1",
                          no_browser=no_browser)
    assert done.returncode == 0, done.stderr[-3000:]
    matched = {t["source"] for t in items if t["kind"] == "trace" and t["outcome"] == "match"}
    assert matched == findable(services.members["nucleotide_blast"], no_browser)
    assert "Number of URLs crawled" in done.stderr


def test_a_bad_service_class_or_seed_list_is_refused_before_any_request(project):
    (project.root / "bad.xml").write_text('<serviceclass>\n<types>\n<type name="x" type="nope"/>\n</types>\n'
                                          "</serviceclass>\n")
    (project.root / "seeds.txt").write_text("http://127.0.0.1:9/\nnot a url at all\n")
    done = project.scrapy("crawl", "dynabot", "-a", "scd=bad.xml", "-a", "seeds=seeds.txt", *SETTINGS)
    assert done.returncode == 1 and "Nothing was crawled" in done.stderr and "Traceback" not in done.stderr
    assert "bad.xml:" in done.stderr and "seeds.txt:2:" in done.stderr
    (project.root / "seeds.txt").write_text("http://127.0.0.1:9/\n")
    done = project.scrapy("crawl", "dynabot", "-a", f"scd={SCD['keyword_search']}", "-a", "seeds=seeds.txt",
                          "-a", "frontier=sideways", "-a", "max_pages=lots", *SETTINGS)
    assert done.returncode == 1 and "sideways" in done.stderr and "max_pages=lots" in done.stderr


def test_probes_put_the_likeliest_assignment_first():
    page = ('<form action="/x" method="post"><input name="email"><input name="title">'
            '<textarea name="SEQUENCE"></textarea><select name="program"><option>blastp</option>'
            '<option>blastn</option></select><input type="submit" name="go" value="Clear">'
            '<input type="submit" name="go" value="Run BLAST"></form>')
    from scd import load_scd

    (first, *_rest) = plan_probes(analyze_forms(page, "http://127.0.0.1/"), load_scd(SCD["nucleotide_blast"]))
    assert first.arguments["sequence"] == "SEQUENCE" and first.assignment["program"] == "blastn"
    assert "email" not in first.assignment and first.button.value == "Run BLAST"  # a mail field stays empty


STYLES = ("blastn-options", "blastn-queue", "blastn-wizard", "failing", "endless", "offsite", "huge",
          "scripted-blastn", "scripted-news")


@pytest.fixture(scope="module")
def styles(services, tmp_path_factory):
    """One crawl over the services in other styles and the hostile ones: (items by source, hits
    per service, why the browser mode was off or None)."""
    project = Project(tmp_path_factory.mktemp("styles"))
    services.reset()
    no_browser = browser_mode()
    done, items = dynabot(project, [services.url(n) for n in STYLES], "nucleotide_blast",
                          "-s", "WEBRACE_DYNABOT_MAX_PROBES_PER_SOURCE=12", "-s", "WEBRACE_DYNABOT_MAX_REFRESH_WAIT=1",
                          no_browser=no_browser)
    assert done.returncode == 0, done.stderr[-3000:]
    hits: dict[str, list[dict]] = {}
    for hit in services.hits():
        hits.setdefault(hit["path"].split("/")[1], []).append(hit)
    found = {name: {i["kind"]: i for i in items if i["source"] == services.url(name)} for name in STYLES}
    return found, hits, no_browser


def test_an_option_driven_service_is_recognised_by_reading_its_error_pages(styles):
    """Program and library are selects no hint names, protein ones selected; errors come as HTTP 400."""
    found, hits, _ = styles
    profile, trace = found["blastn-options"]["profile"], found["blastn-options"]["trace"]
    fields = dict(profile["fields"])
    assert fields["p"] == "blastn" and fields["lib"] in {"refgen", "wgs"} and profile["extracted"]
    first, *_ = trace["steps"]
    assert first["answer"] == "HTTP 400" and "nucleotide" in first["heard"]
    *_, hit, control = trace["steps"]
    assert "the answer says 'nucleotide'" in hit["why"] and control["why"].startswith("control: sequence=")
    sent = [h for h in hits["blastn-options"] if h["path"] == "/blastn-options/align"]
    assert len(sent) == trace["submissions"] == len(trace["steps"]) <= 4


def test_a_job_queue_is_followed_through_refreshes_and_an_entity_escaped_link(styles):
    """303 to a page refreshing itself, then a link written with &amp; under a <base href>."""
    found, hits, _ = styles
    profile = found["blastn-queue"]["profile"]
    assert [s["vertex"] for s in profile["states"]][-2:] == ["running", "summary"]
    assert profile["states"][-1]["url"].endswith("&format=text") and profile["extracted"]
    reports = [h for h in hits["blastn-queue"] if h["path"] == "/blastn-queue/out/report"]
    assert reports and all(h["status"] == 200 and "amp;" not in h["query"] for h in reports)


def test_hostile_services_end_with_an_outcome_and_a_reason_within_the_budgets(styles):
    found, hits, _ = styles
    traces = {name: found[name]["trace"] for name in ("failing", "endless", "offsite", "huge")}
    assert traces["failing"]["outcome"] == "error" and "HTTP 500" in traces["failing"]["reason"]
    assert traces["huge"]["outcome"] == "error" and "over 4194304 bytes" in traces["huge"]["reason"]
    assert traces["offsite"]["outcome"] == "no-match" and "another site" in traces["offsite"]["reason"]
    assert traces["endless"]["outcome"] == "no-match"
    assert all(t["probes"] <= 12 for t in traces.values())
    assert not [name for name in traces if "profile" in found[name]]
    assert set(hits) <= set(STYLES) | {"robots.txt"}  # nothing elsewhere, nothing to 127.0.0.2


def test_a_wizard_in_a_frame_is_followed_to_the_form_that_takes_the_sequence(styles, services):
    found, _, _ = styles
    profile = found["blastn-wizard"]["profile"]
    assert [s["vertex"] for s in profile["states"]] == ["before", "before", "start", "summary"]
    assert profile["states"][1]["url"].endswith("/step2?prog=blastn")
    assert profile["arguments"]["sequence"] == "data" and profile["source"] == services.url("blastn-wizard")


def test_a_script_built_form_is_recognised_in_browser_mode_and_a_page_with_nothing_behind_its_scripts_is_not(
        styles):
    found, hits, no_browser = styles
    if no_browser is not None:  # the crawl ran without it
        pytest.skip(f"browser mode cannot run here: {no_browser}")
    member, other = found["scripted-blastn"], found["scripted-news"]
    assert member["profile"]["extracted"] and member["trace"]["outcome"] == "match"
    assert "shown in the browser" in member["trace"]["steps"][0]["why"]
    assert other["trace"]["outcome"] in ("no-form", "no-match") and other["trace"]["probes"] <= 10
    assert "profile" not in other
    api = [h for h in hits["scripted-blastn"] if h["path"] == "/scripted-blastn/api" and h["method"] == "POST"]
    assert api and all(h["user_agent"].startswith("WebRACE/") for h in api)


def test_without_the_browser_a_script_built_form_is_a_stated_miss(services, project):
    member = services.url("scripted-blastn")
    done, items = dynabot(project, [member], "nucleotide_blast", no_browser="off: this test's choice")
    assert done.returncode == 0, done.stderr[-3000:]
    (trace,) = [i for i in items if i["kind"] == "trace"]
    assert trace["outcome"] != "match" and "browser mode off" in trace["reason"]
