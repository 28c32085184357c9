"""The real-applications hold-out set (holdout/realapps): its logs are read as the servers write
them, and its ground truth is complete (members, side-effect controls, apps that exist)."""

import sys
from collections import Counter
from pathlib import Path

import pytest

# holdout/ on the path only while realapps is imported: the tests that run after this one find
# the path as they would have
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "holdout"))
try:
    from realapps import logs
    from realapps.apps import APPS
    from realapps.serve import load_truth, load_truth_apps, matches
finally:
    del sys.path[0]

LINES = [  # what each server writes for one request
    ('INFO:     127.0.0.1:52458 - "GET /p/packages?_search=library HTTP/1.1" 200 OK', "GET", "/p/packages"),
    ('127.0.0.1 - - [28/Nov/2026 19:19:31] "POST /newticket HTTP/1.1" 303 -', "POST", "/newticket"),
    ('127.0.0.1 127.0.0.1:8771 - [28/Nov/2026:19:22:47 +0000] "POST /index.html HTTP/1.1" 200 14490 "-" "curl"',
     "POST", "/index.html"),
    ('127.0.0.1 - - [28/Nov/2026:13:28:18 +0000] "POST /contact/ HTTP/1.1" 302 0 "-" "Scrapy"', "POST", "/contact/"),
    ("[Sat Nov 28 19:00:00 2026] 127.0.0.1:40000 [200]: POST /doku.php?do=register", "POST", "/doku.php"),
    ('127.0.0.1 - - [x] "GET /user%3F@template=register HTTP/1.1" 200 -', "GET", "/user?@template=register"),
]


@pytest.mark.parametrize(("line", "method", "path"), LINES)
def test_log_line_gives_method_and_path(tmp_path, line, method, path):
    log = tmp_path / "access.log"
    log.write_text("Server starting\n" + line + "\n")
    assert logs.requests(log) == [(method, path)]


def test_posts_counted_per_path_from_an_offset(tmp_path):
    log = tmp_path / "access.log"
    log.write_text(LINES[1][0] + "\n")
    mark = logs.size(log)
    with log.open("a") as f:
        f.write("\n".join(line for line, _, _ in LINES) + "\n")
    assert logs.posts(log, since=mark) == Counter({"/newticket": 1, "/index.html": 1, "/contact/": 1,
                                                   "/doku.php": 1})
    assert logs.posts(tmp_path / "missing.log") == Counter()


@pytest.mark.parametrize(("path", "patterns", "expected"), [
    ("/contact/", ["*"], True), ("/", ["/", "/user*"], True), ("/user", ["/", "/user*"], True),
    ("/issue12", ["/", "/user*"], False), ("/query", ["/newticket", "/ticket/*"], False),
    ("/ticket/3", ["/newticket", "/ticket/*"], True), ("/x", [], False)])
def test_side_effect_patterns(path, patterns, expected):
    assert matches(path, patterns) is expected


def test_truth_has_eight_members_and_four_side_effect_controls_of_known_apps():
    sources = load_truth()
    members = [s for s in sources if s["keyword_search"]]
    controls = [s for s in sources if not s["keyword_search"] and s.get("side_effect")]
    assert len({s["app"] for s in members}) >= 8
    assert len(controls) >= 4
    assert {s["app"] for s in sources} <= set(APPS) == set(load_truth_apps())
    assert all(s["start"].startswith("/") and s["why"] for s in sources)
