"""Scout's JavaDoc application on real javadoc output: the JDK's `javadoc` runs over the Java
sources in tests/fixtures/javadoc, the site it writes is crawled, and the member index
answers which types have a member, inherited ones included."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import urd

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "tests" / "fixtures" / "javadoc" / "src"
EXAMPLE = ROOT / "examples" / "javadoc"

pytestmark = pytest.mark.skipif(shutil.which("javadoc") is None, reason="the JDK's javadoc is not installed")

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


def test_the_readme_recipe_served_by_python_http_server_records_the_member_index(project):
    """README section 7's recipe as written: ``python -m http.server`` serves ``element-list``
    as application/octet-stream; the crawl judges it by its name and content and goes on."""
    shutil.copytree(SOURCES, project.root / "src")
    made = subprocess.run(["javadoc", "-quiet", "-Xdoclint:none", "-d", "api", "-sourcepath", "src", "shapes", "util"],
                          cwd=project.root, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    with http_server(project.root) as port:
        project.write("api-urd.xml", f'<urd id="api" owner="me"><uri timing="86400000">'
                                     f'http://127.0.0.1:{port}/api/element-list</uri><depth level="2"/></urd>\n')
        assert project.scrapy("urd", "add", "api-urd.xml").returncode == 0
        crawl = project.scrapy("crawl", "urd", "-a", f"template={EXAMPLE / 'phase1.xml'}")
        assert crawl.returncode == 0, crawl.stderr[-3000:]
    offline = project.scrapy("rules", "run", "--template", str(EXAMPLE / "template.xml"))
    assert offline.returncode == 0, offline.stderr
    assert query(project, "contains", "MAX") == [f"Found contains {EXPECTED['contains']}", "Not Found MAX"]


@contextmanager
def http_server(directory: Path) -> Iterator[int]:
    """``python -m http.server`` on 127.0.0.1 and a free port (0: the system picks one and
    the server prints it), serving ``directory``."""
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
                              cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        banner = server.stdout.readline()  # Serving HTTP on 127.0.0.1 port 43817 (http://...) ...
        yield int(re.search(r" port (\d+) ", banner).group(1))
    finally:
        server.terminate()
        server.wait(timeout=10)
