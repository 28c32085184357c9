"""ACI records after the seed's Table 6, and their summaries."""

from __future__ import annotations

from webrace.annotation.matcher import KeywordIndex, summary
from webrace.records.aci import Aci, extension_of
from webrace.xmlutil import schema


def make(**kw) -> Aci:
    values = dict(owner="csyiazt1", uri="http://www.cs.ucy.ac.cy/default.html", relevance=18, updatetime=97876950000,
                  filesize=2000, version=2, docbase="a" * 64, summary="keywords 1) java", urgent=True)
    values.update(kw)
    return Aci(**values)


def test_aci_xml_validates_against_the_schema_and_reads_back():
    aci = make()
    xml = aci.to_xml()
    schema("aci").validate(xml)
    assert Aci.from_xml(xml) == aci
    assert 'relevance="18"' in xml and "<docbase>" + "a" * 64 in xml


def test_aci_id_is_stable_per_owner_page_and_version():
    assert make().id == make(relevance=3).id
    assert make().id != make(owner="bob").id != make(docbase="b" * 64).id


def test_summary_quotes_the_text_around_matched_keywords():
    text = ("Welcome to the department. " * 5 + "Our group works on Java crawlers. " + "Filler text. " * 20
            + "We publish research every year.")
    matches = KeywordIndex({"o": [("java", 4), ("research", 3)]}).match(text)
    found = summary(matches, ["java", "research"])
    assert "Java crawlers" in found and "publish research" in found
    assert found.startswith("...") and len(found) <= 300


def test_extension_and_format_from_url_and_media_type():
    assert extension_of("http://a.test/news/", "text/html") == ("html", "html")
    assert extension_of("http://a.test/x.php?id=1", "text/html") == ("php", "html")
    assert extension_of("http://a.test/notes.txt", "text/plain") == ("txt", "text")
