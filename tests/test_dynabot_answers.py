"""DynaBot reads its answers (webrace.dynabot.answers) and follows intermediate pages as a browser
does (webrace.dynabot.analyzer.anchors / onward): in-process, no crawl."""

from __future__ import annotations

from pathlib import Path

import pytest

from scd import load_scd
from webrace.dynabot.analyzer import anchors, onward, page_base, plan_probes, wizard_step
from webrace.dynabot.answers import prose, refinements, said, specific, words
from webrace.dynabot.forms import analyze_forms

ROOT = Path(__file__).resolve().parent.parent
URL = "http://127.0.0.1:8000/align/"


@pytest.fixture(scope="module")
def blastn():
    return load_scd(str(ROOT / "serviceclasses" / "nucleotide_blast.xml"))


OPTIONS_FORM = """<html><body><h1>Align</h1><p>Align a sequence against our libraries.</p>
<form method="post" action="run">
<textarea name="input"></textarea>
<select name="p"><option selected>blastp</option><option>blastx</option><option>blastn</option></select>
<select name="lib"><option value="sp" selected>UniProtKB/Swiss-Prot (protein)</option>
<option value="pdbaa">PDB (protein)</option>
<option value="refgen">RefSeq genomes (nucleotide)</option>
<option value="htgs">High-throughput genomic sequences</option></select>
<input type="submit" value="Align"></form></body></html>"""


def first_probe(service, page=OPTIONS_FORM):
    return plan_probes(analyze_forms(page, URL), service)[0]


def test_an_option_that_fits_an_argument_is_chosen_though_no_hint_names_its_field(blastn):
    probe = first_probe(blastn)
    assert probe.arguments["sequence"] == "input"
    assert probe.assignment["p"] == "blastn" and "lib" not in probe.assignment  # the database: no evidence yet
    assert "BlastProgram->p (an option fits its value)" in probe.why


def test_the_option_the_error_text_names_is_tried_next_and_the_refused_ones_words_do_not_count(blastn):
    probe = first_probe(blastn)
    answer = ("<html><body><h1>Align</h1><p class=error>Database sp holds protein sequences: blastn needs a "
              "nucleotide database.</p>" + OPTIONS_FORM.split("<body>")[1])
    heard = said(answer, OPTIONS_FORM)
    assert {"nucleotide", "protein", "database"} <= heard and "align" not in heard  # the page's own words go
    (best, *rest) = refinements(probe, blastn.examples[probe.example], blastn, heard)
    assert best.assignment["lib"] == "refgen" and best.assignment["p"] == "blastn"
    assert "the answer says 'nucleotide'" in best.why and best.arguments == probe.arguments
    assert all(p.assignment.get("lib") != "pdbaa" or p.score < best.score for p in rest)  # "protein" names the problem


def test_an_answer_that_names_the_value_sent_makes_its_field_vary(blastn):
    page = OPTIONS_FORM.replace(" (protein)", "").replace(" (nucleotide)", "")
    probe = first_probe(blastn, page)
    answer = "<p>Error: sp cannot be searched with blastn.</p>"
    found = refinements(probe, blastn.examples[probe.example], blastn, said(answer, page))
    assert {p.assignment["lib"] for p in found if "lib" in p.assignment} == {"pdbaa", "refgen", "htgs"}


def test_fasta_is_sent_when_the_answer_asks_for_it(blastn):
    probe = first_probe(blastn)
    heard = said("<p>Error: input must be in FASTA format (start with '&gt;')</p>", OPTIONS_FORM)
    fasta = [p for p in refinements(probe, blastn.examples[probe.example], blastn, heard) if "FASTA" in p.why]
    assert fasta and fasta[0].assignment["input"].startswith(">query\n")
    assert fasta[0].assignment["input"].split("\n", 1)[1].strip() == probe.assignment["input"].strip()


def test_an_empty_field_the_answer_names_is_filled(blastn):
    page = OPTIONS_FORM.replace('<textarea name="input"></textarea>',
                                '<label for=t>Job title</label><input id=t name="jobname">'
                                '<textarea name="input"></textarea><input name="notify" type="email">')
    probe = first_probe(blastn, page)
    assert "jobname" not in probe.assignment
    heard = said("<p>Please give your job a title.</p>", page)
    (filled,) = [p for p in refinements(probe, blastn.examples[probe.example], blastn, heard)
                 if "jobname" in p.assignment]
    assert filled.assignment["jobname"] == "webrace" and "names the field (job, title)" in filled.why


def test_an_argument_moves_to_the_field_the_answer_names(blastn):
    page = ('<form action="x" method="post"><input name="title"><input name="dna">'
            '<input type="submit" value="Run"></form>')
    probes = plan_probes(analyze_forms(page, URL), blastn)
    probe = next(p for p in probes if p.arguments["sequence"] == "title")
    heard = said("<p>No DNA given.</p>", page)
    moved = [p for p in refinements(probe, blastn.examples[probe.example], blastn, heard) if "moved" in p.why]
    assert moved and moved[0].arguments["sequence"] == "dna" and "title" not in moved[0].assignment


def test_checkbox_databases_take_an_option_fitting_argument_one_box_at_a_time(blastn):
    page = ('<form action="x" method="post"><textarea name="sequence"></textarea>'
            '<label><input type=checkbox name="databases[]" value="a1"> Human proteins</label>'
            '<label><input type=checkbox name="databases[]" value="b2"> Human genome (DNA)</label>'
            '<button name="method" value="blastn">BLASTN</button></form>')
    probe = plan_probes(analyze_forms(page, URL), blastn)[0]
    heard = said("<p>Please select at least one database.</p>", page)
    found = refinements(probe, blastn.examples[probe.example], blastn, heard)
    assert found[0].assignment["databases[]"] == ["b2"]  # its label's words are the class's ("dna")


def test_words_split_names_and_drop_plurals_and_stop_words():
    assert words("DATALIB dbName", "Choose the databases, please") == {"datalib", "db", "name", "choose", "database"}
    assert prose("<p>Hello</p><form><select><option>nucleotide</option></select></form>").strip() == "Hello"


def test_a_wildcard_argument_is_not_specific(blastn):
    arguments = {a.name: a for a in blastn.examples[0].arguments}
    assert specific(arguments["BlastProgram"]) and not specific(arguments["database"])


def test_links_are_read_by_a_parser_entities_decoded_against_the_base():
    page = ('<html><head><base href="/jobs/"></head><body><a href="report?job=1a2b&amp;view=1">View '
            'results</a> <a href=" status?id=3 ">s</a> <a href="#top">top</a></body></html>')
    base = page_base(page, "http://127.0.0.1:8000/submit")
    assert base == "http://127.0.0.1:8000/jobs/"
    assert anchors(page, base) == ["http://127.0.0.1:8000/jobs/report?job=1a2b&view=1",
                                   "http://127.0.0.1:8000/jobs/status?id=3"]


def test_a_browser_goes_on_by_refresh_location_or_frame_but_never_to_another_site():
    refresh = '<meta http-equiv="Refresh" content="2; url=status?job=1a&amp;v=1"><p>Job running</p>'
    moved = onward(refresh, "http://127.0.0.1:8000/q/submit")
    assert (moved.how, moved.urls, moved.wait) == ("refresh", ["http://127.0.0.1:8000/q/status?job=1a&v=1"], 2.0)
    itself = onward('<meta http-equiv="refresh" content="3">', "http://127.0.0.1:8000/q/s?id=1")
    assert itself.urls == ["http://127.0.0.1:8000/q/s?id=1"]
    frame = onward('<iframe src="out/1.txt"></iframe><iframe src="http://127.0.0.2/ad"></iframe>',
                   "http://127.0.0.1:8000/q/")
    assert (frame.how, frame.urls) == ("frame", ["http://127.0.0.1:8000/q/out/1.txt"])
    assert onward("", "http://127.0.0.1:8000/q", 202, "/jobs/9").urls == ["http://127.0.0.1:8000/jobs/9"]
    assert onward('<meta http-equiv="refresh" content="0;url=http://127.0.0.2:9/x">', "http://127.0.0.1/") is None
    assert onward("<noscript><meta http-equiv=refresh content='0;url=/js'></noscript>", "http://127.0.0.1/") is None


def test_a_url_a_script_builds_from_what_is_typed_is_no_move_the_page_makes_on_its_own():
    """A search box's Enter handler (``location.href = "search.html?q=" + box.value``) is no
    refresh; a whole literal URL, alone or from a timer, is."""
    box = '<script>box.onkeydown = e => { location.href = "search.html?q=" + encodeURIComponent(box.value); };</script>'
    assert onward(box, "http://127.0.0.1:8000/") is None
    assert onward("<script>location.assign('find?q=' + q)</script>", "http://127.0.0.1:8000/") is None
    moved = onward("<script>setTimeout(() => { location.href = 'status?job=1'; }, 1500)</script>",
                   "http://127.0.0.1:8000/q/")
    assert (moved.how, moved.urls, moved.wait) == ("refresh", ["http://127.0.0.1:8000/q/status?job=1"], 1.5)
    assert onward("<script>location.replace('done.html')</script>", "http://127.0.0.1:8000/").urls == [
        "http://127.0.0.1:8000/done.html"]


def test_a_button_named_for_the_program_is_clicked_rather_than_the_first(blastn):
    page = ('<form action="x" method="post"><textarea name="seq"></textarea>'
            '<input type="submit" name="method" value="TBLASTX"><input type="submit" name="method" value="BLASTN">'
            '</form>')
    probe = plan_probes(analyze_forms(page, URL), blastn)[0]
    assert probe.button.value == "BLASTN"


def test_a_file_input_takes_the_sequence_only_where_no_field_does(blastn):
    upload = '<form action="x" method="post" enctype="multipart/form-data"><input type="file" name="f"><input ' \
             'type="submit"></form>'
    assert plan_probes(analyze_forms(upload, URL), blastn)[0].arguments["sequence"] == "f"
    both = upload.replace('<input type="file" name="f">', '<input type="file" name="f"><textarea name="t"></textarea>')
    assert plan_probes(analyze_forms(both, URL), blastn)[0].arguments["sequence"] == "t"


def test_a_first_step_form_is_chosen_by_its_options_and_a_browse_form_is_not(blastn):
    wizard = ('<form action="next"><label><input type=radio name=prog value=tblastx checked>TBLASTX</label>'
              '<label><input type=radio name=prog value=blastn>BLASTN</label><input type=submit value=Next></form>')
    form, assignment, button, why = wizard_step(analyze_forms(wizard, URL), blastn)
    assert assignment == {"prog": "blastn"} and button.value == "Next" and "BlastProgram->prog=blastn" in why
    browse = ('<form action="list"><select name="organism"><option>Human</option><option>Yeast</option></select>'
              '<input type=submit value=Browse></form>')
    assert wizard_step(analyze_forms(browse, URL), blastn) is None
    login = wizard.replace("<input type=submit", "<input type=password name=pw><input type=submit")
    assert wizard_step(analyze_forms(login, URL), blastn) is None


def test_an_answer_naming_only_the_argument_varies_the_options_that_fit_it(blastn):
    """"Database is not nucleotide", options named like databases (no words to go on), field named unlike the hints."""
    page = ('<form action="x" method="post"><textarea name="seq"></textarea><select name="lib">'
            '<option selected>swissprot</option><option>pdbaa</option><option>nt</option><option>refseq_rna</option>'
            '</select><input type="submit" value="Run"></form>')
    probe = plan_probes(analyze_forms(page, URL), blastn)[0]
    found = refinements(probe, blastn.examples[probe.example], blastn, said("<p>Database is not nucleotide</p>", page))
    assert [p.assignment["lib"] for p in found] == ["pdbaa", "nt", "refseq_rna"]
    assert "names the argument database" in found[0].why


def test_a_page_that_reloads_itself_or_moves_on_by_script_is_followed_after_its_delay():
    poll = "<p>Job 42 running</p><script>setTimeout(function () { location.reload(); }, 3000);</script>"
    moved = onward(poll, "http://127.0.0.1:8000/jobs/42")
    assert (moved.how, moved.urls, moved.wait) == ("refresh", ["http://127.0.0.1:8000/jobs/42"], 3.0)
    go = onward("<script>window.location.href = 'result?id=42';</script>", "http://127.0.0.1:8000/jobs/42")
    assert go.urls == ["http://127.0.0.1:8000/jobs/result?id=42"] and go.wait == 2.0
    away = "<script>location.replace('http://127.0.0.2:9/x')</script>"
    assert onward(away, "http://127.0.0.1:8000/") is None


def test_the_argument_an_answer_names_goes_to_one_field_of_words_not_to_a_field_of_numbers(blastn):
    page = ('<form action="x" method="post"><textarea name="querySeq"></textarea>'
            '<select name="expect"><option>0.001</option><option selected>10</option></select>'
            '<input type=checkbox name="ids[]" value="a" checked> HIV nucleotide sequences<br>'
            '<input type=checkbox name="ids[]" value="b"> Viral genomes<br><input type=submit value=Search></form>')
    probe = plan_probes(analyze_forms(page, URL), blastn)[0]
    found = refinements(probe, blastn.examples[probe.example], blastn, said("<p>No such database.</p>", page))
    assert [p.assignment.get("ids[]") for p in found] == [["b"]] and "expect" not in found[0].assignment


def test_an_unlabelled_checkbox_is_named_by_the_text_beside_it():
    (form,) = analyze_forms('<form><input type=checkbox name=db value=v1> Viral proteins<br></form>', URL)
    assert form.parameters[0].options[0].label == "Viral proteins"
