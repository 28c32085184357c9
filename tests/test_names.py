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
