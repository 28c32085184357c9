"""gitweb (Debian ``gitweb``), Git's web interface, over a bare clone of the WebRACE
repository itself (its commit history: real messages by real authors), run by lighttpd.
Search: the form on every project page (GET ``gitweb.cgi?p=webrace.git&a=search&s=`` with
``st`` = commit, author, committer, grep or pickaxe)."""

from __future__ import annotations

from pathlib import Path

from realapps.common import Launch, debian_packages, lighttpd, run

NAME = "gitweb"
REPOSITORY = Path(__file__).resolve().parents[3]
CGI = Path("/usr/lib/cgi-bin")
STATIC = Path("/usr/share/gitweb/static")


def install(home: Path) -> None:
    debian_packages("gitweb", "git", "lighttpd")
    (home / "repos").mkdir()
    run(["git", "clone", "-q", "--bare", "--no-local", str(REPOSITORY), str(home / "repos" / "webrace.git")])
    (home / "repos" / "webrace.git" / "description").write_text("WebRACE: user-driven crawling on Scrapy\n")


def launch(home: Path, port: int, run_dir: Path) -> Launch:
    (run_dir / "www").mkdir()
    conf = run_dir / "gitweb.conf"
    conf.write_text(f'$projectroot = "{home / "repos"}";\n$site_name = "git";\n'
                    '@stylesheets = ("static/gitweb.css");\n$javascript = "static/gitweb.js";\n'
                    '$logo = "static/git-logo.png";\n$favicon = "static/git-favicon.png";\n'
                    "$feature{'pickaxe'}{'default'} = [1];\n$feature{'grep'}{'default'} = [1];\n",
                    encoding="utf-8")
    return lighttpd(port, run_dir, run_dir / "www", aliases={"/cgi-bin/static/": STATIC, "/cgi-bin/": CGI},
                    cgi={".cgi": ""}, setenv={"GITWEB_CONFIG": str(conf)}, ready="/cgi-bin/gitweb.cgi")
