"""Xapian Omega (Debian ``xapian-omega``), a search engine's CGI front end, over an index
``omindex`` builds of Python's HTML documentation (``python3.11-doc``, also served, under
``/doc/``), run by lighttpd. Search: GET ``/cgi-bin/omega/omega?P=``."""

from __future__ import annotations

from pathlib import Path

from realapps.common import Launch, debian_packages, lighttpd, run

NAME = "omega"
DOCS = Path("/usr/share/doc/python3.11-doc/html")
CGI = Path("/usr/lib/cgi-bin/omega")


def install(home: Path) -> None:
    debian_packages("xapian-omega", "python3.11-doc", "lighttpd")
    (home / "data").mkdir()
    run(["omindex", "--db", str(home / "data" / "default"), "--url", "/doc/", str(DOCS)])


def launch(home: Path, port: int, run_dir: Path) -> Launch:
    (run_dir / "www").mkdir()
    conf = run_dir / "omega.conf"
    conf.write_text(f"database_dir {home / 'data'}\ntemplate_dir /usr/share/xapian-omega/templates\n"
                    f"log_dir {run_dir}\ncdb_dir {run_dir}\n", encoding="utf-8")
    return lighttpd(port, run_dir, run_dir / "www", aliases={"/cgi-bin/omega/": CGI, "/doc/": DOCS},
                    cgi={"": ""}, setenv={"OMEGA_CONFIG_FILE": str(conf)}, ready="/cgi-bin/omega/omega")
