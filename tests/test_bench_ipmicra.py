"""bench/ipmicra.py --capacity-draws: the worlds it compares exploring on, and its refusals."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def bench(load_bench):
    return load_bench("ipmicra")


def test_capacity_draws_are_the_hard_draws_with_capacities_and_100_organisations_or_more(bench):
    every = bench.hard_draws(10, 555)
    chosen = bench.capacity_draws([555])
    assert [case.world for case in chosen] == [case.world for case in every
                                              if case.capacity is not None and case.world.orgs >= 100]
    assert 0 < len(chosen) < len(every)
    assert all(case.name.endswith("of --hard-draw 555") for case in chosen)


@pytest.mark.parametrize("seeds", ["x", "1,,2", "1.5"])
def test_capacity_draws_that_are_not_integers_are_refused_in_one_line(bench, monkeypatch, capsys, seeds):
    monkeypatch.setattr(sys, "argv", ["ipmicra.py", "--capacity-draws", seeds])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "seeds are integers" in err and "Traceback" not in err


@pytest.mark.parametrize("repeats", ["0", "21"])
def test_repeats_out_of_range_are_refused_in_one_line(bench, monkeypatch, capsys, repeats):
    monkeypatch.setattr(sys, "argv", ["ipmicra.py", "--repeats", repeats])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--repeats 1 to 20" in err and "Traceback" not in err


def test_the_scale_bench_times_the_command_on_each_size_for_both_trees(load_bench, monkeypatch, capsys, tmp_path):
    # this tree against itself, on two small batches: both run the real command on the files written
    scale = load_bench("ipmicra_scale")
    monkeypatch.setattr(sys, "argv", ["ipmicra_scale.py", "--baseline", str(scale.ROOT), "--sizes", "40,80",
                                      "--crawlers", "3", "--keep", str(tmp_path)])
    assert scale.main() == 0
    out = capsys.readouterr().out
    for size in (40, 80):
        lines = (tmp_path / f"urls-{size}" / "candidate.jsonl").read_text().splitlines()
        assert len(lines) == size
        assert (tmp_path / f"urls-{size}" / "baseline.jsonl").read_text().splitlines() == lines  # same tree, same file
        assert f"Delegated {size} URL(s)" in out
    assert "candidate's time a URL against 40 URLs: 40: 1.00x, 80: " in out


@pytest.mark.parametrize(("flag", "value", "words"), [("--sizes", "10,x", "URLs are integers"),
                                                      ("--sizes", "0", "--sizes take 1 to"),
                                                      ("--crawlers", "0", "--crawlers 1 to"),
                                                      ("--baseline", "/nonexistent", "not a WebRACE checkout")])
def test_the_scale_bench_refuses_bad_options_in_one_line(load_bench, monkeypatch, capsys, flag, value, words):
    scale = load_bench("ipmicra_scale")
    monkeypatch.setattr(sys, "argv", ["ipmicra_scale.py", flag, value])
    with pytest.raises(SystemExit) as exit_:
        scale.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and words in err and "Traceback" not in err
