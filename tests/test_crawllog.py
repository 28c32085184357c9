"""What a crawl prints (issue 45): at the default INFO its last lines are the WebRACE summary;
Scrapy's dumps (versions, settings, components, stats) only with WEBRACE_SCRAPY_DUMPS or at
DEBUG; with stderr no terminal, no progress line."""

from __future__ import annotations

from conftest import urd


def _crawl(site, project, **settings):
    site.html("/", ["/a.html", "/b.html"])
    site.html("/a.html")
    site.html("/b.html")
    project.add_urds(urd("u", "ann", site.url("/"), depth=1))
    run = project.crawl(**{"LOG_LEVEL": "INFO", **settings})
    assert run.returncode == 0 and len(run.pages) == 3, run.stderr[-3000:]
    return run.stderr.splitlines()


def test_at_info_a_crawl_ends_with_the_summary_and_shows_no_scrapy_dumps(site, project):
    lines = _crawl(site, project)
    start = next(n for n, line in enumerate(lines) if "WebRACE crawl summary (finished)" in line)
    assert all("[webrace.summary]" in line for line in lines[start:]), lines[start:]
    text = "\n".join(lines)
    for dump in ("Versions:", "Overridden settings:", "Enabled extensions:", "Enabled downloader middlewares:",
                 "Dumping Scrapy stats:", "'downloader/request_count'"):
        assert dump not in text
    assert len(lines) < 30, text


def test_with_stderr_no_terminal_no_progress_line_is_written(site, project):
    text = "\n".join(_crawl(site, project))
    assert "\r" not in text and "\x1b[" not in text and "Crawling:" not in text


def test_webrace_scrapy_dumps_brings_them_back_before_the_summary(site, project):
    lines = _crawl(site, project, WEBRACE_SCRAPY_DUMPS=True)
    text = "\n".join(lines)
    assert "INFO: Overridden settings:" in text and "INFO: Enabled extensions:" in text
    dump = next(n for n, line in enumerate(lines) if "Dumping Scrapy stats:" in line)
    summary = next(n for n, line in enumerate(lines) if "WebRACE crawl summary" in line)
    assert dump < summary


def test_at_debug_the_dumps_are_debug_lines(site, project):
    text = "\n".join(_crawl(site, project, LOG_LEVEL="DEBUG"))
    assert "DEBUG: Dumping Scrapy stats:" in text and "DEBUG: Overridden settings:" in text
    assert "INFO: Dumping Scrapy stats:" not in text
