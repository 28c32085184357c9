"""URD parsing and validation against webrace/schemas/urd.xsd."""

from __future__ import annotations

from decimal import Decimal

import pytest

from webrace.urd import Urd, UrdError, load_files, parse

SEED_URD = b"""<urd id="cs" owner="csyiazt1">
  <uri timing="600000" lastcheck="97876750000" port="80">http://www.cs.ucy.ac.cy/default.html</uri>
  <type protocol="http" method="pull" processtype="filter"/>
  <keywords>
    <keyword key="ibm" weight="1"/>
    <keyword key="research" weight="3"/>
    <keyword key="java" weight="4"/>
    <keyword key="xmpl4j" weight="5"/>
  </keywords>
  <depth level="4"/>
  <urgency urgent="1"/>
</urd>"""


def test_the_seeds_table_4_urd_parses_with_id_and_owner():
    (urd,) = parse(SEED_URD)
    assert urd.id == "cs" and urd.owner == "csyiazt1"
    assert urd.url == "http://www.cs.ucy.ac.cy/default.html"
    assert (urd.timing, urd.lastcheck, urd.depth, urd.scope, urd.urgent) == (600000, 97876750000, 4, "host", True)
    assert [(k.key, k.weight) for k in urd.keywords][-1] == ("xmpl4j", Decimal(5))
    assert urd.next_due == 97876750000 + 600000


def test_a_urds_list_with_children_in_any_order():
    urds = parse(b"""<urds>
      <urd id="a" owner="alice"><uri timing="1000">http://a.test/</uri><depth level="0"/></urd>
      <urd id="b" owner="bob"><scope>domain</scope><depth level="2"/><uri timing="5000">https://b.test</uri></urd>
    </urds>""")
    assert [(u.id, u.scope, u.url) for u in urds] == [("a", "host", "http://a.test/"), ("b", "domain", "https://b.test/")]


def test_port_attribute_applies_only_when_the_url_has_none():
    (a,) = parse(b'<urd id="a" owner="o"><uri timing="1" port="8080">http://a.test/x</uri><depth level="0"/></urd>')
    (b,) = parse(b'<urd id="b" owner="o"><uri timing="1" port="8080">http://a.test:9/x</uri><depth level="0"/></urd>')
    assert a.url == "http://a.test:8080/x" and b.url == "http://a.test:9/x"


def test_xml_round_trip_preserves_the_urd():
    (urd,) = parse(SEED_URD)
    assert Urd.from_xml(urd.to_xml()) == urd


def test_the_owner_is_kept_in_the_canonical_form_accounts_use():
    """``owner="Alice"`` is alice's URD (webrace.names), parsed or read back from a store that
    kept it as given before names were case folded."""
    (urd,) = parse(b'<urd id="a" owner="Alice"><uri timing="1000">http://a.test/</uri><depth level="0"/></urd>')
    assert urd.owner == "alice"
    assert Urd.from_record({**urd.to_record(), "owner": "Alice"}).owner == "alice"


def test_never_checked_urd_is_due_now():
    (urd,) = parse(b'<urd id="a" owner="o"><uri timing="1000">http://a.test/</uri><depth level="0"/></urd>')
    assert urd.is_due(0)
    assert not urd.checked(5000).is_due(5999) and urd.checked(5000).is_due(6000)


@pytest.mark.parametrize(("xml", "message"), [
    (b'<urd id="a" owner="o"><uri timing="1">ftp://a.test/</uri><depth level="0"/></urd>',
     "not an absolute http:// or https:// URL"),
    (b'<urd id="a" owner="o"><uri timing="0">http://a.test/</uri><depth level="0"/></urd>', "timing"),
    (b'<urd id="a" owner="o">\n<uri timing="1">http://a.test/</uri>\n</urd>', "depth"),
    (b'<urd owner="o"><uri timing="1">http://a.test/</uri><depth level="0"/></urd>', "id"),
    (b'<urd id="a" owner="o"><uri timing="1">http://a.test/</uri><depth level="0"/><scope>web</scope></urd>',
     "host"),
    (b'<urd id="a" owner="o"><uri timing="1">http://a.test/</uri><depth level="0"/><urgency urgent="2"/></urd>',
     "urgent"),
    (b'<urd id="a" owner="o"><uri timing="1">http://a.test:70000/</uri><depth level="0"/></urd>', "Port"),
    (b'<urd id="a" owner="o"><uri timing="1">http://a.test/', "not well-formed"),
    (b'<!DOCTYPE urd [<!ENTITY x SYSTEM "file:///etc/passwd">]><urd id="a" owner="o">'
     b'<uri timing="1">http://a.test/&x;</uri><depth level="0"/></urd>', "DOCTYPE"),
    (b'<urds><urd id="a" owner="o"><uri timing="1">http://a.test/</uri><depth level="0"/></urd>\n'
     b'<urd id="a" owner="p"><uri timing="1">http://b.test/</uri><depth level="0"/></urd></urds>', "duplicated"),
])
def test_invalid_urd_is_refused_with_file_line_and_reason(xml, message):
    with pytest.raises(UrdError) as info:
        parse(xml, source="bad.xml")
    text = str(info.value)
    assert text.startswith("bad.xml:") and text.split(":")[1].isdigit()
    assert message in text


def test_error_names_the_line_of_the_offending_element():
    xml = b'<urds>\n<urd id="a" owner="o"><uri timing="1">http://a.test/</uri><depth level="0"/></urd>\n' \
          b'<urd id="b" owner="o">\n<uri timing="x">http://b.test/</uri><depth level="0"/></urd>\n</urds>'
    with pytest.raises(UrdError) as info:
        parse(xml, source="f.xml")
    assert str(info.value).startswith("f.xml:4:")


# Each: a multi-line file, and the line of what is wrong in it (not its <urd>'s line).
BAD_CHILDREN = {
    "misspelt child": ('<urd id="a" owner="o">\n  <uri timing="1">http://a.test/</uri>\n\n  <dept level="2"/>\n'
                       '</urd>', 4),
    "repeated child": ('<urd id="a" owner="o">\n  <uri timing="1">http://a.test/</uri>\n  <depth level="1"/>\n'
                       '  <!-- a comment -->\n  <depth level="2"/>\n</urd>', 5),
    "unknown child of keywords": ('<urds>\n<urd id="a" owner="o">\n  <uri timing="1">http://a.test/</uri>\n'
                                  '  <keywords>\n    <keyword key="k"/>\n    <kw key="j"/>\n  </keywords>\n'
                                  '  <depth level="1"/>\n</urd>\n</urds>', 6),
    "bad attribute three lines down": ('<urd id="a" owner="o">\n  <uri timing="1">http://a.test/</uri>\n\n'
                                       '  <depth level="999"/>\n</urd>', 4),
}


@pytest.mark.parametrize("case", BAD_CHILDREN)
def test_error_names_the_line_of_the_bad_child_not_of_its_urd(case, tmp_path):
    text, line = BAD_CHILDREN[case]
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(UrdError) as info:
        load_files([path])
    assert info.value.problems[0].startswith(f"{path}:{line}: "), info.value.problems


def test_same_id_in_two_files_of_one_add_is_refused(tmp_path):
    one = tmp_path / "one.xml"
    two = tmp_path / "two.xml"
    one.write_bytes(b'<urd id="a" owner="o"><uri timing="1">http://a.test/</uri><depth level="0"/></urd>')
    two.write_bytes(b'<urd id="a" owner="p"><uri timing="1">http://b.test/</uri><depth level="0"/></urd>')
    with pytest.raises(UrdError, match="also defined"):
        load_files([one, two])


def test_missing_file_is_reported_not_raised(tmp_path):
    with pytest.raises(UrdError, match="cannot read"):
        load_files([tmp_path / "nope.xml"])
