"""webrace.names: the one owner-name rule and the one form names are stored and compared in."""

from __future__ import annotations

import pytest

from webrace.names import canonical_owner, owner_name_problem


@pytest.mark.parametrize(("given", "canonical"), [
    ("alice", "alice"),
    ("Alice", "alice"),
    ("ALICE", "alice"),
    ("ａｌｉｃｅ", "alice"),  # fullwidth: NFKC
    ("ＡＬＩＣＥ", "alice"),
    ("\u212a", "k"),  # KELVIN SIGN
    ("Straße", "strasse"),  # case folding, not lower()
    ("alice.smith@example.org", "alice.smith@example.org"),
    ("x" * 128, "x" * 128),
    ("Ｘ" * 128, "x" * 128),
])
def test_names_that_differ_only_in_case_or_width_have_one_canonical_form(given, canonical):
    assert canonical_owner(given) == canonical and owner_name_problem(given) is None


@pytest.mark.parametrize("given", ["", "a b", "alice\nroot", "alice\x00", "ı", "élodie", "x" * 129, "Ｘ" * 600,
                                   None, 42, ["alice"]])
def test_what_has_no_canonical_form_is_no_owner_name(given):
    assert canonical_owner(given) is None
    problem = owner_name_problem(given)
    assert problem.startswith("not a valid owner name") and "\n" not in problem


def _urd_owner(owner: str) -> str:
    from webrace.urd import UrdError, parse

    xml = f'<urd id="a" owner="{owner}"><uri timing="1000">http://a.test/</uri><depth level="0"/></urd>'
    try:
        return parse(xml.encode())[0].owner
    except UrdError as exc:
        raise ValueError(str(exc)) from None


def _entry_paths() -> dict:
    """Every place an owner name comes in, each returning the name as it stores it."""
    from webrace.records.channel import check_owner
    from webrace.records.sentinel import make
    from webrace.web.accounts import check_name

    return {"account": check_name, "sentinel": lambda o: make(o, "http://a.test/", "content").owner,
            "channel": check_owner, "urd": _urd_owner}


@pytest.mark.parametrize("path", ["account", "sentinel", "channel", "urd"])
def test_every_entry_path_stores_the_canonical_form_and_refuses_what_the_rule_refuses(path):
    store = _entry_paths()[path]
    assert store("Alice") == store("ALICE") == store("alice") == "alice"
    for bad in ("alice\nroot", "a b", "", "x" * 129):
        with pytest.raises(ValueError, match="owner"):
            store(bad)
