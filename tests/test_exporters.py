"""CSV feeds (webrace/exporters.py): one item type per file, with that type's columns."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import pickle

import pytest
from conftest import urd

from webrace.exporters import CsvItemExporter, JsonItemExporter, JsonLinesItemExporter, split_csv_feeds
from webrace.items import Page
from webrace.records.aci import Aci
from webrace.rounds.groups import Members

PAGE = Page(url="http://a.test/", parent_url=None, depth=0, owners=["alice"], urd_ids=["a"], urgent=False,
            status=200, content_type="text/html", size=10, links=["http://a.test/x?a=1,2", "http://a.test/y"],
            ip="127.0.0.1", fetched_at="2026-01-01T00:00:00.000Z", not_modified=False, version=1,
            new_version=True, digest="0" * 64, kept=True, relevant_to=["alice"], round="local-1")
ACI = Aci("alice", "http://a.test/", 3.0, 1_700_000_000_000, 10, 1, "0" * 64, "java, java")


def export(*items, **options) -> list[list[str]]:
    out = io.BytesIO()
    exporter = CsvItemExporter(out, **options)
    exporter.start_exporting()
    for item in items:
        exporter.export_item(item)
    exporter.finish_exporting()
    return list(csv.reader(io.StringIO(out.getvalue().decode())))


def test_a_csv_file_keeps_the_columns_of_its_item_type_and_leaves_other_types_out(caplog):
    with caplog.at_level(logging.WARNING):
        rows = export(PAGE, ACI, PAGE, ACI)
    assert rows[0] == list(Page.fields)
    assert [row[0] for row in rows[1:]] == ["http://a.test/", "http://a.test/"]  # two pages, no ACI row
    assert "Aci items are not written" in caplog.text and "left out 2 Aci" in caplog.text


def test_an_aci_file_has_the_aci_columns():
    rows = export(ACI)
    assert rows[0] == [f.name for f in dataclasses.fields(Aci)]
    assert dict(zip(rows[0], rows[1], strict=True))["summary"] == "java, java"


def test_lists_are_json_so_a_url_with_a_comma_reads_back():
    header, row = export(PAGE)
    assert json.loads(dict(zip(header, row, strict=True))["links"]) == ["http://a.test/x?a=1,2", "http://a.test/y"]


def test_columns_chosen_with_feed_export_fields_take_every_item():
    rows = export(PAGE, ACI, fields_to_export=["version"])
    assert rows == [["version"], ["1"], ["1"]]


@pytest.mark.parametrize(("feeds", "spider", "expected"), [
    ({"pages.csv": {"format": "csv", "overwrite": True}}, "urd", {
        "pages.csv": {"format": "csv", "overwrite": True, "item_classes": ["webrace.items.Page"]},
        "pages.acis.csv": {"format": "csv", "overwrite": True, "item_classes": ["webrace.records.aci.Aci"],
                           "store_empty": False},
        "pages.results.csv": {"format": "csv", "overwrite": True,
                              "item_classes": ["webrace.scout.engine.RuleResult"], "store_empty": False},
        "pages.notifications.csv": {"format": "csv", "overwrite": True,
                                    "item_classes": ["webrace.sentinels.evaluate.Notification"],
                                    "store_empty": False}}),
    ({"out": {"format": "csv"}}, "dynabot", {
        "out": {"format": "csv", "item_classes": ["webrace.items.ServiceProfile"]},
        "out.traces.csv": {"format": "csv", "item_classes": ["webrace.items.ServiceTrace"], "store_empty": False}}),
    ({"pages.jsonl": {"format": "jsonlines"}}, "urd", {"pages.jsonl": {"format": "jsonlines"}}),
    ({"stdout:": {"format": "csv"}}, "urd", {"stdout:": {"format": "csv"}}),
    ({"acis.csv": {"format": "csv", "item_classes": ["x.Aci"]}}, "urd",
     {"acis.csv": {"format": "csv", "item_classes": ["x.Aci"]}}),
    ({"p.csv": {"format": "csv"}}, "someone-elses-spider", {"p.csv": {"format": "csv"}}),
])
def test_command_line_csv_feeds_become_one_feed_per_item_type(feeds, spider, expected):
    assert split_csv_feeds(feeds, spider) == expected


def test_crawl_into_a_csv_file_writes_pages_and_acis_each_with_their_own_columns(site, project):
    site.html("/", ["/java.html"], text="Home")
    site.add("/java.html", "<html><head><title>J</title></head><body><p>Java and java.</p></body></html>")
    project.add_urds(urd("a", "alice", site.url("/"), depth=1, keywords={"java": 2}))
    done = project.scrapy(*project.crawl_args(project.root / "pages.csv"))
    assert done.returncode == 0, done.stderr
    assert "CSVExporter dropped fields" not in done.stderr and "not written" not in done.stderr
    with (project.root / "pages.csv").open(newline="") as handle:
        pages = list(csv.DictReader(handle))
    with (project.root / "pages.acis.csv").open(newline="") as handle:
        acis = list(csv.DictReader(handle))
    assert list(pages[0]) == list(Page.fields) and len(pages) == 2
    assert {p["url"] for p in pages} == {site.url("/"), site.url("/java.html")}
    assert json.loads(next(p for p in pages if p["url"] == site.url("/"))["links"]) == [site.url("/java.html")]
    assert list(acis[0]) == [f.name for f in dataclasses.fields(Aci)]
    assert [(a["owner"], a["uri"], a["relevance"]) for a in acis] == [("alice", site.url("/java.html"), "4.0")]
    assert not (project.root / "pages.results.csv").exists()  # no rule ran: no empty file


def shared_pages(count: int) -> list[Page]:
    owners, ids = Members(f"owner{n}" for n in range(500)), Members(f"u{n}" for n in range(500))
    return [Page(url=f"http://a.test/{n}", owners=owners, urd_ids=ids, urgent=False, relevant_to=[f"owner{n}"])
            for n in range(count)]


@pytest.mark.parametrize("exporter_class", [JsonLinesItemExporter, JsonItemExporter])
def test_json_feeds_encode_the_owner_lists_pages_share_once_and_read_back_the_same(exporter_class, monkeypatch):
    out = io.BytesIO()
    exporter = exporter_class(out, encoding="utf-8")
    encoded = []
    real = exporter.encoder.encode
    monkeypatch.setattr(exporter.encoder, "encode", lambda value: encoded.append(value) or real(value))
    pages = shared_pages(20)
    exporter.start_exporting()
    for page in pages:
        exporter.export_item(page)
    exporter.finish_exporting()
    text = out.getvalue().decode()
    read = json.loads(text) if exporter_class is JsonItemExporter else [json.loads(x) for x in text.splitlines()]
    assert read == [dict(page) for page in pages]
    assert sum(1 for value in encoded if isinstance(value, list) and len(value) == 500) == 2  # owners, ids: once


def test_a_shared_owner_list_cannot_be_changed_in_place_and_pickles_as_a_list():
    owners = Members(["alice", "bob"])
    for change in (lambda: owners.append("eve"), lambda: owners.__setitem__(0, "eve"), owners.clear, owners.sort):
        with pytest.raises(TypeError, match="copy the list"):
            change()
    assert owners == ["alice", "bob"] and list(owners) + ["eve"] == ["alice", "bob", "eve"]
    copy = pickle.loads(pickle.dumps(owners))
    assert type(copy) is list and copy == ["alice", "bob"]
