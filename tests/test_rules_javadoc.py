"""Scout's JavaDoc application on real javadoc output: the JDK's `javadoc` runs over the Java
sources in tests/fixtures/javadoc, the site it writes is crawled, and the member index
answers which types have a member, inherited ones included; and the recipe of docs/how-to/rules.md
runs word for word from a clone's root."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import urd

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "tests" / "fixtures" / "javadoc" / "src"
EXAMPLE = ROOT / "examples" / "javadoc"

pytestmark = pytest.mark.skipif(shutil.which("javadoc") is None, reason="the JDK's javadoc is not installed")

# one worker runs this module (setup.cfg: --dist loadgroup): its module-wide set-up is paid once
pytestmark = [pytestmark, pytest.mark.xdist_group("rules_javadoc")]

EXPECTED = {
    "contains": ["shapes.AbstractShape", "shapes.Circle", "util.Bag", "util.Container", "util.Sized",
                 "util.SortedBag"],
    "size": ["util.Bag", "util.Container", "util.Sized", "util.SortedBag"],
    "MAX_SIZE": ["util.Bag", "util.Sized", "util.SortedBag"],  # an interface constant, inherited twice over
    "MAX_VALUE": ["shapes.AbstractShape", "shapes.Circle"],
    "area": ["shapes.AbstractShape", "shapes.Circle", "shapes.Shape"],  # AbstractShape inherits it from Shape
    "first": ["util.SortedBag"],
}


@pytest.fixture(scope="module")
def javadoc_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("javadoc") / "api"
    done = subprocess.run(["javadoc", "-quiet", "-Xdoclint:none", "-d", str(out), "-sourcepath", str(SOURCES),
                           "shapes", "util"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def serve(site, out: Path) -> str:
    for path in out.rglob("*"):
        if path.suffix == ".html":
            site.add("/api/" + path.relative_to(out).as_posix(), path.read_bytes())
    listing = out / "element-list" if (out / "element-list").exists() else out / "package-list"
    site.add(f"/api/{listing.name}", listing.read_bytes(), content_type="text/plain")
    return site.url(f"/api/{listing.name}")


def query(project, *names):
    done = subprocess.run([sys.executable, "-m", "rules.javadoc", *names], cwd=project.root, env=project.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_crawl_describes_every_type_and_the_index_answers_member_queries(site, project, javadoc_output):
    start = serve(site, javadoc_output)
    project.add_urds(urd("api", "alice", start, depth=2))
    run = project.crawl("-a", f"template={EXAMPLE / 'template.xml'}")
    assert run.returncode == 0, run.stderr[-3000:]
    described = {i["results"][0]["name"]: i["results"] for i in run.items if i.get("rule") == "ClassDoc"}
    assert sorted(described) == ["shapes.AbstractShape", "shapes.Circle", "shapes.Shape", "util.Bag",
                                 "util.Container", "util.Sized", "util.SortedBag"]
    assert described["shapes.Circle"][0]["superclass"] == "shapes.AbstractShape"
    assert described["util.Bag"][0]["interfaces"] == ["util.Sized"]
    assert {"kind": "method", "name": "describe", "params": ["String"]} in described["shapes.AbstractShape"]
    packages = {i["results"][0]["package"]: i["results"][0] for i in run.items if i.get("rule") == "PackageIndex"}
    assert packages["util"]["interfaces"] == ["util.Container", "util.Sized"]
    lines = query(project, *EXPECTED, "MAX")
    assert lines == [f"Found {name} {classes}" for name, classes in EXPECTED.items()] + ["Not Found MAX"]


def test_two_phases_collect_then_rerun_offline(site, project, javadoc_output):
    """The seed's way: a first crawl with the package rules only, then every rule over the
    cached documents, with no request."""
    start = serve(site, javadoc_output)
    project.add_urds(urd("api", "alice", start, depth=2))
    assert project.crawl("-a", f"template={EXAMPLE / 'phase1.xml'}").returncode == 0
    assert site.count("/api/util/SortedBag.html") == 1
    site.clear_hits()
    offline = project.scrapy("rules", "run", "--template", str(EXAMPLE / "template.xml"))
    assert offline.returncode == 0, offline.stderr
    assert site.hits == []
    assert query(project, "contains", "first") == [f"Found contains {EXPECTED['contains']}",
                                                   f"Found first {EXPECTED['first']}"]


GUIDE = ROOT / "docs" / "how-to" / "rules.md"


def guide_recipe() -> list[tuple[str, list[str]]]:
    """The console block of the JavaDoc example of docs/how-to/rules.md: each ``$ `` command
    with the output lines shown under it."""
    text = GUIDE.read_text(encoding="utf-8").split("## Example: Scout's JavaDoc application", 1)[1]
    steps: list[tuple[str, list[str]]] = []
    for line in text.split("```console\n", 1)[1].split("```", 1)[0].splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def as_typed(command: str) -> str:
    """A command of the guide as this interpreter runs it (``scrapy`` and ``python`` on PATH may be others)."""
    command = re.sub(r"^scrapy ", f"{shlex.quote(sys.executable)} -m scrapy ", command)
    return re.sub(r"^python ", f"{shlex.quote(sys.executable)} ", command)


def clone_root(root: Path) -> Path:
    """What the recipe reads of a fresh clone, at ``root``: the code and the Java sources
    (linked), ``scrapy.cfg`` and ``examples/`` (copied: the URD's port is the test's)."""
    root.mkdir()
    for name in ("webrace", "rules", "tests"):
        (root / name).symlink_to(ROOT / name, target_is_directory=True)
    shutil.copy(ROOT / "scrapy.cfg", root / "scrapy.cfg")
    shutil.copytree(ROOT / "examples", root / "examples")
    return root


def test_the_guides_recipe_runs_word_for_word_from_the_repository_root(tmp_path):
    """The guide's JavaDoc recipe (docs/how-to/rules.md), each command as printed, from a clone's root with a
    user's environment (the data directory is the default ``.webrace``), served by
    ``python -m http.server``; its one placeholder is the port (the system picks a free one).
    Every command succeeds and prints what the guide shows under it."""
    steps = guide_recipe()
    assert [command.split()[:3] for command, _ in steps] == [
        ["javadoc", "-quiet", "-Xdoclint:none"], ["python", "-m", "http.server"], ["scrapy", "urd", "add"],
        ["scrapy", "crawl", "urd"], ["scrapy", "rules", "run"], ["python", "-m", "rules.javadoc"]]
    (make, _), (serve, _), *rest = steps
    placeholder = re.search(r" http\.server (\d+) ", serve).group(1)
    urd_file = re.search(r"scrapy urd add (\S+)", rest[0][0]).group(1)
    shipped = (ROOT / urd_file).read_text(encoding="utf-8")
    assert f"http://127.0.0.1:{placeholder}/element-list" in shipped  # the guide's port is the URD's
    if (ROOT / ".git").exists():  # shipped: a clone has it (git does not ignore it)
        assert subprocess.run(["git", "check-ignore", "-q", urd_file], cwd=ROOT).returncode == 1

    root = clone_root(tmp_path / "webrace")
    user_env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "WEBRACE_DATA_DIR")}

    def run(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(as_typed(command), shell=True, cwd=root, env=user_env, capture_output=True, text=True,
                              timeout=300)

    made = run(make)
    assert made.returncode == 0, made.stdout + made.stderr
    assert made.stdout == made.stderr == ""  # -quiet, -Xdoclint:none
    assert serve.endswith(" &")
    server = subprocess.Popen(shlex.split(as_typed(serve.removesuffix(" &").replace(f" {placeholder} ", " 0 "))),
                              cwd=root, env={**user_env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        banner = server.stdout.readline()  # Serving HTTP on 127.0.0.1 port 43817 (http://127.0.0.1:43817/) ...
        port = re.search(r" port (\d+) ", banner).group(1)
        (root / urd_file).write_text(shipped.replace(f":{placeholder}/", f":{port}/"), encoding="utf-8")
        for command, shown in rest:
            done = run(command)
            assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
            if shown:
                assert done.stdout.splitlines() == shown, command
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert (root / ".webrace" / "results.sqlite").exists()
    assert rest[-1][1] == [f"Found contains {EXPECTED['contains']}", "Not Found MAX"]
