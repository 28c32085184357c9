"""`scrapy urd add / list / remove`, run as a user runs them."""

from __future__ import annotations

import json

from conftest import urd


def test_add_then_list_shows_one_line_per_urd(project):
    path = project.write("u.xml", "<urds>" + urd("a1", "alice", "http://a.test/", depth=2, timing=600000)
                         + urd("b1", "bob", "http://b.test/x", timing=90_000) + "</urds>")
    added = project.scrapy("urd", "add", str(path))
    assert added.returncode == 0, added.stderr
    assert "Added 2 URD(s)" in added.stdout
    listed = project.scrapy("urd", "list")
    lines = listed.stdout.strip().splitlines()
    assert lines[0].split() == ["ID", "OWNER", "URL", "DEPTH", "TIMING", "LAST", "CHECK", "NEXT", "DUE"]
    assert lines[1].split() == ["a1", "alice", "http://a.test/", "2", "10m", "never", "now"]
    assert lines[2].split() == ["b1", "bob", "http://b.test/x", "0", "1m30s", "never", "now"]


def test_list_jsonl_is_machine_readable(project):
    project.add_urds(urd("a1", "alice", "http://a.test/", depth=1))
    listed = project.scrapy("urd", "list", "--format", "jsonl")
    record = json.loads(listed.stdout)
    assert record["id"] == "a1" and record["due"] is True and record["lastcheck"] is None


def test_re_adding_an_id_replaces_it(project):
    project.add_urds(urd("a1", "alice", "http://a.test/", depth=1))
    path = project.write("again.xml", urd("a1", "alice", "http://a.test/new", depth=3))
    added = project.scrapy("urd", "add", str(path))
    assert "replaced: a1" in added.stdout
    listed = project.scrapy("urd", "list").stdout.splitlines()
    assert len(listed) == 2 and "http://a.test/new" in listed[1] and " 3 " in listed[1]


def test_invalid_file_is_refused_and_nothing_is_stored(project):
    good = project.write("good.xml", urd("g1", "alice", "http://a.test/"))
    bad = project.write("bad.xml", "<urds>\n" + urd("ok", "bob", "http://b.test/") + "\n"
                        + '<urd id="broken" owner="bob"><uri timing="1">gopher://x/</uri><depth level="0"/></urd>\n'
                        + "</urds>\n")
    result = project.scrapy("urd", "add", str(good), str(bad))
    assert result.returncode != 0
    assert f"{bad}:3:" in result.stderr and "http" in result.stderr
    assert "Nothing was stored" in result.stderr
    listed = project.scrapy("urd", "list", "--format", "jsonl").stdout
    assert listed.strip() == ""  # neither the valid file nor the valid URD of the bad file


def test_malformed_xml_is_refused_with_its_line(project):
    bad = project.write("bad.xml", "<urds>\n<urd id='a' owner='o'>\n<uri timing='1'>http://a.test/</urd>\n</urds>")
    result = project.scrapy("urd", "add", str(bad))
    assert result.returncode != 0
    assert f"{bad}:3: not well-formed XML" in result.stderr


def test_remove_deletes_and_reports_unknown_ids(project):
    project.add_urds(urd("a1", "alice", "http://a.test/"), urd("b1", "bob", "http://b.test/"))
    result = project.scrapy("urd", "remove", "a1", "zz")
    assert result.returncode != 0
    assert "Removed 1 URD(s): a1" in result.stdout and "no URD with id zz" in result.stderr
    listed = project.scrapy("urd", "list").stdout
    assert "a1" not in listed and "b1" in listed


def test_unknown_subcommand_is_a_usage_error(project):
    result = project.scrapy("urd", "frobnicate")
    assert result.returncode == 2
    assert "unknown subcommand" in result.stderr


def test_crawl_updates_last_check_so_the_urd_is_no_longer_due(site, project):
    site.html("/")
    project.add_urds(urd("a1", "alice", site.url("/"), timing=3_600_000))
    first = project.crawl()
    assert len(first.items) == 1
    record = json.loads(project.scrapy("urd", "list", "--format", "jsonl").stdout)
    assert record["due"] is False and record["lastcheck"] is not None
    second = project.crawl()
    assert second.items == [] and site.count("/") == 1
    assert "No URD is due" in second.stderr
    forced = project.crawl("-a", "urd=a1")
    assert len(forced.items) == 1


def test_crawl_with_nothing_registered_ends_cleanly(project):
    run = project.crawl()
    assert run.returncode == 0
    assert "No URD registered" in run.stderr


def test_due_makes_urds_due_now_and_keeps_their_last_check(site, project):
    site.html("/")
    project.add_urds(urd("a1", "alice", site.url("/")), urd("b1", "bob", site.url("/")))
    project.crawl()
    before = listed(project)
    assert not before["a1"]["due"] and not before["b1"]["due"]
    made = project.scrapy("urd", "due", "a1", "zz")
    assert made.returncode == 1 and "1 URD(s) due now: a1" in made.stdout and "no URD with id zz" in made.stderr
    after = listed(project)
    assert after["a1"]["due"] and not after["b1"]["due"]
    assert after["a1"]["lastcheck"] == before["a1"]["lastcheck"]
    assert project.scrapy("urd", "due").returncode == 2  # neither --all nor ids
    assert "2 URD(s) due now" in project.scrapy("urd", "due", "--all").stdout


def listed(project) -> dict[str, dict]:
    lines = project.scrapy("urd", "list", "--format", "jsonl").stdout.splitlines()
    return {record["id"]: record for record in map(json.loads, lines)}
