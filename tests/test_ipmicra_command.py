"""`scrapy ipmicra delegate` and `scrapy ipmicra simulate`: the command other tools rely on."""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
import threading
from collections import Counter

import pytest
from scrapy.exceptions import UsageError
from scrapy.settings import Settings

RIR = """2|ripencc|20240101|4|19830101|20240101|+0100
ripencc|*|ipv4|*|3|summary
# a comment
ripencc|CY|ipv4|194.42.0.0|768|20000101|allocated|org-ucy
ripencc|CY|ipv4|194.42.16.0|4096|20000101|allocated|org-ucy
ripencc|GR|ipv4|195.251.0.0|65536|19950101|allocated|org-grnet
ripencc|CY|asn|3268|1|19950101|allocated|org-ucy
"""
CRAWLERS = [{"id": "cy", "ip": "194.42.0.10", "capacity": 100}, {"id": "gr", "ip": "195.251.1.10", "capacity": None}]
LATENCY = {"194.42.1.5": {"cy": 3.0, "gr": 40.0}, "194.42.16.7": {"cy": 4.0, "gr": 41.0},
           "195.251.9.9": {"cy": 38.0, "gr": 5.0}}


def write_inputs(project, latency=LATENCY, urls=None) -> None:
    project.write("ripe.txt", RIR)
    project.write("crawlers.json", json.dumps(CRAWLERS))
    project.write("latency.csv", "crawler,ip,ms\n" + "".join(
        f"{c},{ip},{ms}\n" for ip, row in latency.items() for c, ms in row.items()))
    project.write("urls.txt", "\n".join(urls or ["http://194.42.1.5/", "http://195.251.9.9/a",
                                                 "http://194.42.16.7/x", "http://194.42.1.5/again",
                                                 "http://example.org/not-an-ip"]) + "\n")


def delegate(project, *extra):
    return project.scrapy("ipmicra", "delegate", "--rir", "ripe.txt", "--crawlers", "crawlers.json",
                          "--latency", "latency.csv", "--urls", "urls.txt", "-o", "out.jsonl", *extra)


def test_delegate_writes_one_line_per_url_in_input_order_and_a_summary(project):
    write_inputs(project)
    done = delegate(project)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (project.root / "out.jsonl").read_text().splitlines()]
    assert [set(line) for line in lines] == [{"url", "ip", "crawler", "probes"}] * 4
    assert [(x["url"], x["ip"], x["crawler"]) for x in lines] == [
        ("http://194.42.1.5/", "194.42.1.5", "cy"), ("http://195.251.9.9/a", "195.251.9.9", "gr"),
        ("http://194.42.16.7/x", "194.42.16.7", "cy"), ("http://194.42.1.5/again", "194.42.1.5", "cy")]
    assert lines[0]["probes"] == 0  # 194.42.0.0/23 is cy's home subnet, delegated at registration
    assert lines[3]["probes"] == 0  # same subnet again: no probe
    assert "urls.txt:5: skipped" in done.stderr and "Delegated 4 URL(s)" in done.stderr


def test_a_missing_latency_row_is_a_clear_error_and_no_output(project):
    write_inputs(project, latency={"194.42.1.5": {"cy": 3.0}})
    done = delegate(project)
    # URL 3 is the first one outside a crawler's home subnet: the first that needs a probe
    assert done.returncode == 1 and "latency.csv" in done.stderr and "urls.txt:3" in done.stderr
    assert "Traceback" not in done.stderr and not (project.root / "out.jsonl").exists()


def test_bad_crawler_and_latency_files_name_file_and_line(project):
    write_inputs(project)
    project.write("latency.csv", "crawler,ip,ms\ncy,194.42.1.5,fast\n")
    done = delegate(project)
    assert done.returncode == 1 and "latency.csv:2" in done.stderr
    write_inputs(project)
    project.write("crawlers.json", '[{"id": "cy"}]')
    done = delegate(project)
    assert done.returncode == 1 and "crawlers.json" in done.stderr and "needs" in done.stderr


def test_simulate_prints_the_benchmark_metrics(project):
    done = project.scrapy("ipmicra", "simulate", "--crawlers", "4", "--urls", "200", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "random" in done.stdout and "IPMicra 50 ms" in done.stdout and "probes/URL" in done.stdout
    assert "download s" in done.stdout


def test_delegate_keeps_probes_as_knowledge_and_runs_the_seeds_search_on_request(project):
    # 194.42.32.0/20 is a third block of org-ucy: what was probed in its second block decides it
    project.write("ripe.txt", RIR + "ripencc|CY|ipv4|194.42.32.0|4096|20000101|allocated|org-ucy\n")
    latency = {**LATENCY, "194.42.32.5": {"cy": 4.5, "gr": 40.5}}
    project.write("crawlers.json", json.dumps(CRAWLERS))
    project.write("latency.csv", "crawler,ip,ms\n" + "".join(
        f"{c},{ip},{ms}\n" for ip, row in latency.items() for c, ms in row.items()))
    project.write("urls.txt", "http://194.42.16.7/x\nhttp://194.42.32.5/y\n")
    probes = {}
    for strategy in ("knowledge", "search"):
        done = delegate(project, "--strategy", strategy)
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in (project.root / "out.jsonl").read_text().splitlines()]
        assert [line["crawler"] for line in lines] == ["cy", "cy"]
        probes[strategy] = [line["probes"] for line in lines]
    assert probes["knowledge"] == [2, 0]  # the organisation's kept probes decide its third block
    assert probes["search"][1] >= 1  # the seed's search probes the organisation's crawler again


def test_a_probe_budget_and_an_explore_rate_are_taken_and_out_of_range_ones_refused_before_any_output(project):
    write_inputs(project)
    done = delegate(project, "--probe-budget", "-2")
    assert done.returncode != 0 and "--probe-budget" in done.stderr and "Traceback" not in done.stderr
    assert not (project.root / "out.jsonl").exists()
    done = delegate(project, "--explore", "5")
    assert done.returncode != 0 and "--explore 5: 0 to 4" in done.stderr and "Traceback" not in done.stderr
    assert not (project.root / "out.jsonl").exists()
    done = delegate(project, "--probe-budget", "0", "--probe-credit", "0", "--explore", "1")
    assert done.returncode == 0, done.stderr
    assert len((project.root / "out.jsonl").read_text().splitlines()) == 4


def test_delegate_says_on_stderr_only_what_it_skipped_and_its_summary(project):
    # 300 URLs of one host, whose crawler fills up: pages move, and what nobody measured stays unknown
    write_inputs(project, urls=[f"http://194.42.1.5/{i}" for i in range(300)] + ["http://195.251.9.9/z"])
    done = delegate(project)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("delegated ")]  # progress
    assert len(lines) == 1 and lines[0].startswith("Delegated 301 URL(s)"), done.stderr  # no numpy warning


def test_delegate_writes_where_each_url_ends_up_and_no_crawler_gets_more_than_its_capacity(project):
    # a simulated world whose capacities bind: making room on a full crawler moves pages decided
    # earlier, and the file is what a crawl follows (it once said where each URL went first: 78 URLs
    # for a crawler of capacity 55)
    from webrace.delegation import World, simulate

    sim = simulate(4, 200, 3, capacity=55, world=World(regions=3, orgs=40))
    project.write("ripe.txt", "\n".join(sim.rir_lines) + "\n")
    project.write("crawlers.json", json.dumps([{"id": c.id, "ip": str(c.ip), "capacity": c.capacity}
                                               for c in sim.crawlers]))
    project.write("latency.csv", "crawler,ip,ms\n" + "".join(f"{c},{ip},{ms}\n" for c, ip, ms in sim.latency_rows))
    project.write("urls.txt", "\n".join(sim.urls) + "\n")
    done = delegate(project)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (project.root / "out.jsonl").read_text().splitlines()]
    assert [x["url"] for x in lines] == sim.urls
    written = Counter(x["crawler"] for x in lines)
    assert max(written.values()) <= 55 and sum(written.values()) == 200, written
    # the summary's pages per crawler are the file's
    summary = done.stderr.split("pages per crawler: ", 1)[1].strip()
    assert dict((c, int(n)) for c, n in (part.split() for part in summary.split(", "))) == dict(written)
    assert "balanced" in done.stderr  # pages did move


def test_delegate_gives_the_same_file_for_the_same_inputs(project):
    # a capacity-bound world with near-ties: with the wall clock, measurements' drift terms turned
    # them, and three runs wrote three different files
    from webrace.delegation import World, simulate

    sim = simulate(4, 300, seed=12, capacity=87, world=World(regions=3, orgs=180, path_noise=0.3))
    project.write("ripe.txt", "\n".join(sim.rir_lines) + "\n")
    project.write("crawlers.json", json.dumps([{"id": c.id, "ip": str(c.ip), "capacity": c.capacity}
                                               for c in sim.crawlers]))
    project.write("latency.csv", "crawler,ip,ms\n" + "".join(f"{c},{ip},{ms}\n" for c, ip, ms in sim.latency_rows))
    project.write("urls.txt", "\n".join(sim.urls) + "\n")
    outputs = []
    for _ in range(2):
        done = delegate(project)
        assert done.returncode == 0, done.stderr
        outputs.append((project.root / "out.jsonl").read_text())
    assert outputs[0] == outputs[1]


# -- in this process: bad inputs and the output path -------------------------------------------

def run_delegate(tmp_path, capsys, *extra: str, output: str = "out.jsonl") -> tuple[int, str]:
    """``scrapy ipmicra delegate`` over the files of :func:`write_inputs` in ``tmp_path``, in this
    process: (exit code, stderr)."""
    from webrace.commands.ipmicra import Command

    command = Command()
    command.settings = Settings()
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    files = [(flag, str(tmp_path / name)) for flag, name in (
        ("--rir", "ripe.txt"), ("--crawlers", "crawlers.json"), ("--latency", "latency.csv"), ("--urls", "urls.txt"))]
    opts, positional = parser.parse_known_args(
        ["delegate", *(part for pair in files for part in pair), "-o", str(tmp_path / output), *extra])
    command.run(positional, opts)
    return command.exitcode, capsys.readouterr().err


class Files:
    """What :func:`write_inputs` wants of a project: ``write`` under ``root``."""

    def __init__(self, root) -> None:
        self.root = root

    def write(self, name: str, text: str) -> None:
        (self.root / name).write_text(text)


def test_output_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path, capsys):
    write_inputs(Files(tmp_path))
    (tmp_path / "target.jsonl").write_text("old\n")
    (tmp_path / "out.jsonl").symlink_to("target.jsonl")
    assert run_delegate(tmp_path, capsys)[0] == 0
    assert (tmp_path / "out.jsonl").is_symlink() and os.readlink(tmp_path / "out.jsonl") == "target.jsonl"
    assert len((tmp_path / "target.jsonl").read_text().splitlines()) == 4


def test_output_into_a_fifo_goes_to_its_reader_and_the_fifo_stays(tmp_path, capsys):
    write_inputs(Files(tmp_path))
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    code, err = run_delegate(tmp_path, capsys)
    reader.join(timeout=30)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and len(got[0].splitlines()) == 4


def test_output_gets_the_umask_mode_when_new_and_keeps_the_old_mode_when_replacing(tmp_path, capsys):
    write_inputs(Files(tmp_path))
    old_umask = os.umask(0o027)
    try:
        assert run_delegate(tmp_path, capsys)[0] == 0
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(tmp_path / "out.jsonl").st_mode) == 0o640
    os.chmod(tmp_path / "out.jsonl", 0o604)
    assert run_delegate(tmp_path, capsys)[0] == 0
    assert stat.S_IMODE(os.stat(tmp_path / "out.jsonl").st_mode) == 0o604
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("output", ["no/such/dir/out.jsonl", "adir", "."])
def test_output_in_a_missing_directory_or_naming_one_is_an_error_before_any_work(tmp_path, capsys, output):
    write_inputs(Files(tmp_path))
    (tmp_path / "adir").mkdir()
    (tmp_path / "latency.csv").write_text("not a latency table\n")  # reading it would be an error of its own
    code, err = run_delegate(tmp_path, capsys, output=output)
    assert code == 1 and err.count("\n") == 1 and err.startswith(f"error: {tmp_path / output}: cannot write: ")
    assert "latency.csv" not in err


def test_a_url_every_crawler_has_as_unreachable_is_skipped_counted_and_not_delegated(tmp_path, capsys):
    latency = {**LATENCY, "195.251.9.9": {"cy": math.inf, "gr": math.inf}}
    write_inputs(Files(tmp_path), latency=latency)
    code, err = run_delegate(tmp_path, capsys)
    assert code == 0, err
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert "http://195.251.9.9/a" not in [line["url"] for line in lines] and len(lines) == 3
    assert "urls.txt:2: skipped: no crawler can reach 195.251.9.9" in err and "skipped 2" in err


@pytest.mark.parametrize("value", ["nan", "-5"])
def test_a_threshold_that_is_nan_or_negative_is_a_usage_error(tmp_path, capsys, value):
    write_inputs(Files(tmp_path))
    with pytest.raises(UsageError, match="--threshold-ms"):
        run_delegate(tmp_path, capsys, "--strategy", "search", "--threshold-ms", value)
    assert not (tmp_path / "out.jsonl").exists()


def test_a_rir_error_names_the_file_once_and_cuts_a_huge_line(tmp_path, capsys):
    write_inputs(Files(tmp_path))
    (tmp_path / "ripe.txt").write_text(RIR + "x" * 1_000_000 + "\n")
    code, err = run_delegate(tmp_path, capsys)
    assert code == 1 and err.count(str(tmp_path / "ripe.txt")) == 1 and len(err) < 1000
    assert err.startswith(f"error: {tmp_path / 'ripe.txt'}:8: expected registry") and "1,000,000 characters" in err


def test_a_long_batch_says_how_far_it_is_on_stderr(tmp_path, capsys, monkeypatch):
    from webrace.commands import ipmicra

    write_inputs(Files(tmp_path))
    monkeypatch.setattr(ipmicra, "PROGRESS_S", 0.0)  # a line before every URL
    code, err = run_delegate(tmp_path, capsys)
    assert code == 0, err
    progress = [line for line in err.splitlines() if line.startswith("delegated ")]
    assert progress[0] == "delegated 0 of 4 URL(s), 0 probe(s) (0.00 per URL)"
    assert len(progress) == 4 and progress[-1].startswith("delegated 3 of 4 URL(s)")
