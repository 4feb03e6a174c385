"""judge-eval labels: proposals from a results folder, their formats, the review page's file, and
importing reviews back as qrels. Every expected number here is worked out by hand in a comment.

The fixture tests/data/labels/tiny/ is a results folder built by hand (tests/data/labels/README.md):
two questions, seven verdicts, each with a known set of conflicting signals.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from judge_eval.cli import main
from judge_eval.errors import ConfigError, InputError
from judge_eval.labels import import_reviews, item_id, load_proposals, propose, write_review_page
from judge_eval.labels.confidence import confidence, signals
from judge_eval.labels.spans import locate

DATA = Path(__file__).parent / "data" / "labels"
TINY = DATA / "tiny"


def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# ----------------------------------------------------------------------------- confidence


def test_confidence_proxy_takes_off_a_documented_amount_per_signal() -> None:
    clean = {"grade": 3, "capped_grade": 3, "supported": [1], "unverified": 0, "invalid_statement": 0}
    assert signals(clean) == [] and confidence(clean) == 1.0
    # grade 2: only the boundary signal: 1 - 0.2
    assert confidence(dict(clean, grade=2, capped_grade=2)) == 0.8
    # grade 3, no verified support, a failed quote: capped to 1 -> 1 - 0.4 - 0.4 - 0.2 = 0
    capped = dict(clean, capped_grade=1, supported=[], unverified=1)
    assert signals(capped) == ["rejected_evidence", "grade_without_support", "boundary"]
    assert confidence(capped) == 0.0
    # grade 0 while statement 2 is supported: 1 - 0.4
    assert confidence(dict(clean, grade=0, capped_grade=0, supported=[2])) == 0.6
    # a claim naming statement 9 of 2 counts as rejected evidence: grade 3 supported -> 1 - 0.4
    assert confidence(dict(clean, invalid_statement=1)) == 0.6
    assert confidence({"error": "timeout", "grade": None}) == 0.0


def test_with_samples_confidence_is_the_share_of_samples_that_agree_with_the_verdict() -> None:
    # final: grade 2, statement 1. Samples: (2, {1}) agrees, (2, {1}) agrees, (3, {1}) does not -> 2/3
    v = {"grade": 2, "capped_grade": 2, "supported": [1], "sample_grades": [2, 2, 3],
         "sample_supported": [[1], [1], [1]]}
    assert confidence(v) == pytest.approx(2 / 3)
    assert "samples_disagree" in signals(v)
    # same grades, but one sample claimed statement 2 too: (2,{1}) (2,{1,2}) (2,{1}) -> 2/3
    v = dict(v, sample_grades=[2, 2, 2], sample_supported=[[1], [1, 2], [1]])
    assert confidence(v) == pytest.approx(2 / 3)
    # all four agree -> 1, although grade 2 is at the boundary (the proxy is not used)
    v = dict(v, sample_grades=[2, 2, 2, 2], sample_supported=[[1]] * 4)
    assert confidence(v) == 1.0


# ----------------------------------------------------------------------------- proposals


def test_uncertainty_order_puts_conflicting_signals_first() -> None:
    # confidences by hand (module docstring of confidence.py): c2 grade 3 capped to 1 with a failed
    # quote -> 0.0 with 3 signals; c5 judge error -> 0.0 with 1 signal; c7 grade 1 + failed quote
    # -> 0.4; c3 grade 0 but supports statement 2 -> 0.6; c4 grade 2 -> 0.8; c1, c6 -> 1.0 (q1 first)
    p = load_proposals(TINY)
    assert [(it["chunk_id"], it["confidence"]) for it in p.items] == [
        ("c2", 0.0), ("c5", 0.0), ("c7", 0.4), ("c3", 0.6), ("c4", 0.8), ("c1", 1.0), ("c6", 1.0)]
    assert p.items[0]["signals"] == ["rejected_evidence", "grade_without_support", "boundary"]


def test_question_and_run_orders() -> None:
    # question: q1 then q2; by best rank in any run, ties by chunk id: c1 (1), c3 (1), c2 (2); c4, c5, c6, c7
    assert [it["chunk_id"] for it in load_proposals(TINY, order="question").items] == \
        ["c1", "c3", "c2", "c4", "c5", "c6", "c7"]
    # run: chunks of run a (q1: c1, c2; q2: c4, c5 in rank order), then those only run b returned
    assert [it["chunk_id"] for it in load_proposals(TINY, order="run").items] == \
        ["c1", "c2", "c4", "c5", "c3", "c6", "c7"]


def test_an_item_carries_everything_a_reviewer_needs() -> None:
    items = {it["chunk_id"]: it for it in load_proposals(TINY).items}
    c1 = items["c1"]
    assert c1["id"] == item_id("q1", "c1") and len(c1["id"]) == 16
    assert c1["question"] == "Who wrote Hamlet?"
    assert c1["statements"] == [{"n": 1, "text": "Shakespeare wrote Hamlet."}, {"n": 2, "text": "Hamlet is a tragedy."}]
    assert c1["runs"] == {"a": 1, "b": 2} and c1["proposed_grade"] == 3 and c1["supported"] == [1, 2]
    assert c1["reason"] == "names the author and the genre"
    assert {k: c1[k] for k in ("grade", "reviewer", "reviewed_at", "note")} == \
        {"grade": None, "reviewer": None, "reviewed_at": None, "note": None}
    # the proposal is the capped grade; the judge's own grade is kept beside it
    assert (items["c2"]["proposed_grade"], items["c2"]["judge_grade"]) == (1, 3)
    assert items["c5"]["proposed_grade"] is None and items["c5"]["error"] == "timeout"


def test_evidence_offsets_point_at_the_quote_in_the_chunk() -> None:
    items = {it["chunk_id"]: it for it in load_proposals(TINY).items}
    text = items["c1"]["chunk_text"]
    # "Hamlet is a tragedy by William Shakespeare. " is 44 characters; the quote is 24 long
    assert items["c1"]["evidence"] == [
        {"statement": 1, "quote": "Shakespeare wrote Hamlet", "spans": [[44, 68]]},
        {"statement": 2, "quote": "a tragedy", "spans": [[10, 19]]}]
    assert text[44:68] == "Shakespeare wrote Hamlet" and text[10:19] == "a tragedy"
    # an elided quote gives one span per part: "water boils at 100 degrees" at 14..40 and
    # "(212 °F)" at 49..57 of "At sea level, water boils at 100 degrees Celsius (212 °F)."
    assert items["c4"]["evidence"][0]["spans"] == [[14, 40], [49, 57]]
    # normalisation: case, typographic quotes and a no-break space still locate the original span
    chunk = "The \u201cRussian Blue\u201d cat\u00a0has a double coat."
    assert locate('russian blue" cat has', chunk) == [(5, 26)]
    assert locate("a quote that is not there at all", chunk) == []


def test_limit_and_only_unlabelled(tmp_path: Path) -> None:
    qrels = tmp_path / "have.txt"
    qrels.write_text("q1 0 c2 1\nq2 0 c5 0\n")
    p = load_proposals(TINY, only_unlabelled=True, qrels=qrels)
    assert [it["chunk_id"] for it in p.items] == ["c7", "c3", "c4", "c1", "c6"] and p.left_out_labelled == 2
    assert [it["chunk_id"] for it in load_proposals(TINY, limit=2).items] == ["c2", "c5"]
    with pytest.raises(ConfigError, match="--only-unlabelled needs --qrels"):
        load_proposals(TINY, only_unlabelled=True)
    with pytest.raises(ConfigError, match="only used with --only-unlabelled"):
        load_proposals(TINY, qrels=qrels)


def test_a_folder_without_texts_is_refused_with_what_to_do(tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(TINY, old)
    lines = (old / "verdicts.jsonl").read_text().splitlines()
    row = json.loads(lines[1])
    del row["chunk_text"]
    lines[1] = json.dumps(row)
    (old / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        load_proposals(old)
    assert (e.value.line, e.value.field) == (2, "chunk_text")
    assert "run the same `judge-eval score` again" in str(e.value)


# ----------------------------------------------------------------------------- formats


@pytest.mark.parametrize("fmt,name", [("jsonl", "tiny.jsonl"), ("csv", "tiny.csv"),
                                      ("label-studio", "tiny.label-studio.json"), ("argilla", "tiny.argilla.json")])
def test_each_format_is_its_fixture(tmp_path: Path, fmt: str, name: str) -> None:
    """The fixtures in tests/data/labels/expected/ were checked with Label Studio's and Argilla's own
    SDKs (tests/data/labels/check_tool_formats.py); any change to a writer shows up here."""
    _, paths = propose(TINY, tmp_path / name, fmt=fmt, order="question")
    for p in paths:
        assert p.read_text(encoding="utf-8") == (DATA / "expected" / p.name).read_text(encoding="utf-8"), p.name


def test_label_studio_tasks_fit_their_labelling_config() -> None:
    config = ET.fromstring((DATA / "expected" / "tiny.label-studio.label_config.xml").read_text())
    names = {el.get("name"): el for el in config.iter() if el.get("name")}
    variables = {el.get("value")[1:] for el in config.iter() if el.tag == "Text"}
    labels = {lab.get("value") for lab in names["evidence"]}
    tasks = json.loads((DATA / "expected" / "tiny.label-studio.json").read_text())
    for task in tasks:
        assert variables <= set(task["data"]), "every $variable of a Text tag is in the task data"
        for pred in task.get("predictions", []):
            assert 0 <= pred["score"] <= 1 and pred["model_version"] == "openai:example/test-judge"
            ids = [r["id"] for r in pred["result"]]
            assert len(ids) == len(set(ids))
            for r in pred["result"]:
                control = names[r["from_name"]]
                assert control.get("toName") == r["to_name"] and r["to_name"] in names
                if r["type"] == "choices":
                    assert control.tag == "Choices" and r["value"]["choices"] == [str(task["data"]["proposed_grade"])]
                else:
                    assert control.tag == "Labels" and r["type"] == "labels" and set(r["value"]["labels"]) <= labels
                    v = r["value"]
                    assert task["data"]["chunk_text"][v["start"]:v["end"]] == v["text"]
    errored = [t for t in tasks if t["data"]["chunk_id"] == "c5"][0]
    assert "predictions" not in errored, "no proposal, no pre-annotation"


def test_argilla_records_fit_their_settings() -> None:
    settings = json.loads((DATA / "expected" / "tiny.argilla.settings.json").read_text())
    fields = {f["name"] for f in settings["fields"]}
    questions = {q["name"]: q for q in settings["questions"]}
    metadata = {m["name"] for m in settings["metadata"]}
    assert [o["value"] for o in questions["grade"]["settings"]["options"]] == [0, 1, 2, 3]
    records = json.loads((DATA / "expected" / "tiny.argilla.json").read_text())
    for r in records:
        assert set(r["fields"]) == fields and set(r["metadata"]) <= metadata and r["id"] == item_id(
            r["metadata"]["question_id"], r["metadata"]["chunk_id"])
        assert set(r["suggestions"]) <= set(questions)
        for span in r["suggestions"].get("evidence", {}).get("value", []):
            assert span["label"] in {o["value"] for o in questions["evidence"]["settings"]["options"]}
            assert 0 <= span["start"] < span["end"] <= len(r["fields"]["chunk"])
    c1 = [r for r in records if r["metadata"]["chunk_id"] == "c1"][0]
    assert c1["suggestions"]["grade"] == {"value": 3, "score": 1.0, "agent": "openai:example/test-judge"}
    assert c1["suggestions"]["evidence"]["value"] == [{"start": 44, "end": 68, "label": "S1"},
                                                      {"start": 10, "end": 19, "label": "S2"}]


def test_csv_keeps_lists_as_json_and_statements_as_numbered_lines() -> None:
    rows = list(csv.DictReader(io.StringIO((DATA / "expected" / "tiny.csv").read_text())))
    c1 = rows[0]
    assert c1["statements"] == "1. Shakespeare wrote Hamlet.\n2. Hamlet is a tragedy."
    assert json.loads(c1["evidence"])[0]["spans"] == [[44, 68]] and json.loads(c1["runs"]) == {"a": 1, "b": 2}
    assert c1["grade"] == c1["reviewer"] == "" and c1["proposed_grade"] == "3"


# ----------------------------------------------------------------------------- import


def test_import_a_label_studio_export(tmp_path: Path) -> None:
    out = tmp_path / "qrels.txt"
    report = import_reviews(DATA / "label_studio_export.json", out)
    # c1 3 kept; c3 0->2 up; c2 1->0 down (a cancelled annotation ignored); c4 2 kept; c5 no
    # proposal, graded 1 (new); c6 not annotated; c7 two annotators agree on 1 (kept)
    assert out.read_text() == "q1 0 c1 3\nq1 0 c3 2\nq1 0 c2 0\nq2 0 c4 2\nq2 0 c5 1\nq2 0 c7 1\n"
    assert (report.reviewed, report.kept, report.up, report.down, report.new, report.unreviewed) == (6, 3, 1, 1, 1, 1)
    # kappa over the 5 (final, proposed) pairs (3,3) (2,0) (0,1) (2,2) (1,1): p_o = 3/5; margins final
    # (.2,.2,.4,.2), proposed (.2,.4,.2,.2) over grades 0-3, p_e = .04+.08+.08+.04 = .24 ->
    # (.6-.24)/(1-.24) = 9/19. Quadratic: observed 1.0, expected E[a^2] - 2E[a]E[b] + E[b^2] =
    # 3.6 - 2*1.6*1.4 + 3.0 = 2.12 -> 1 - 1/2.12 = 28/53
    assert report.kappa.value == pytest.approx(9 / 19) and report.kappa.n == 5 and report.kappa.n_questions == 2
    assert report.weighted_kappa.value == pytest.approx(28 / 53)
    prov = list(csv.DictReader((tmp_path / "qrels.provenance.csv").open()))
    assert [(r["chunk_id"], r["proposed_grade"], r["final_grade"], r["decision"]) for r in prov] == [
        ("c1", "3", "3", "kept"), ("c3", "0", "2", "up"), ("c2", "1", "0", "down"), ("c4", "2", "2", "kept"),
        ("c5", "", "1", "new"), ("c7", "1", "1", "kept")]
    assert prov[1]["reviewer"] == "bo@example.org" and prov[2]["note"] == "another play"
    assert prov[0]["reviewed_at"] == "2026-11-30T10:01:00.000000Z" and prov[6 - 1]["reviewer"] == "user 1, user 2"


@pytest.mark.parametrize("name", ["argilla_export.json", "argilla_export_flat.json"])
def test_import_an_argilla_export(tmp_path: Path, name: str) -> None:
    out = tmp_path / "qrels.txt"
    report = import_reviews(DATA / name, out, provenance=tmp_path / "prov.csv")
    # c1 3 kept; c3 0->1 up; c2 1 kept (a draft 3 is not a label); c4 2->3 up (two agree); c5, c6
    # unanswered (c6's answer was discarded); c7 1->0 down
    assert out.read_text() == "q1 0 c1 3\nq1 0 c3 1\nq1 0 c2 1\nq2 0 c4 3\nq2 0 c7 0\n"
    assert (report.kept, report.up, report.down, report.unreviewed) == (2, 2, 1, 2)
    # pairs (3,3) (1,0) (1,1) (3,2) (0,1): p_o = .4; final (.2,.4,0,.4), proposed (.2,.4,.2,.2):
    # p_e = .04+.16+0+.08 = .28 -> (.4-.28)/.72 = 1/6
    assert report.kappa.value == pytest.approx(1 / 6)


def test_a_flat_argilla_export_with_uneven_response_lists_is_refused(tmp_path: Path) -> None:
    records = json.loads((DATA / "argilla_export_flat.json").read_text())
    records[0]["grade.responses"] = [3, 2]  # two answers, one user and one status
    records[1]["grade.responses.status"] = "submitted"  # not a list
    bad = tmp_path / "flat.json"
    bad.write_text(json.dumps(records))
    out = tmp_path / "q.txt"
    with pytest.raises(InputError) as err:
        import_reviews(bad, out)
    text = str(err.value)
    assert "record 1" in text and "grade.responses.users" in text and "1 entries for 2 responses" in text
    assert "grade.responses.status" in text and "record 2" in text
    assert not out.exists()


def test_accept_unreviewed_writes_the_judges_grade_for_the_rest(tmp_path: Path) -> None:
    report = import_reviews(DATA / "label_studio_export.json", tmp_path / "q.txt", accept_unreviewed=True)
    assert (tmp_path / "q.txt").read_text().splitlines()[-2:] == ["q2 0 c6 0", "q2 0 c7 1"]
    assert report.written == 7 and report.reviewed == 6
    assert "proposed" in (tmp_path / "q.provenance.csv").read_text()


def _reviewed_jsonl(tmp_path: Path, changes: dict[str, int]) -> Path:
    """Propose as JSONL, accept every proposal, then change the grades in ``changes``."""
    src = tmp_path / "proposals.jsonl"
    propose(TINY, src, fmt="jsonl")
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    for row in rows:
        row["grade"] = changes.get(row["chunk_id"], row["proposed_grade"])
        row["reviewer"] = "ann"
    out = tmp_path / "reviewed.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_round_trip_propose_change_import_metrics(tmp_path: Path) -> None:
    # proposals (capped): q1 c1 3, c2 1, c3 0; q2 c4 2, c5 none (error), c6 0, c7 1.
    # The reviewer sets c2 -> 0, c3 -> 2, c5 -> 1 and accepts the rest.
    reviewed = _reviewed_jsonl(tmp_path, {"c2": 0, "c3": 2, "c5": 1})
    assert _cli("labels", "import", str(reviewed), "--out", str(tmp_path / "imported.txt")).exit_code == 0
    expected = tmp_path / "expected.txt"
    expected.write_text("q1 0 c1 3\nq1 0 c2 0\nq1 0 c3 2\nq2 0 c4 2\nq2 0 c5 1\nq2 0 c6 0\nq2 0 c7 1\n")
    runs = ["--run", f"a={DATA / 'tiny_a.trec'}", "--run", f"b={DATA / 'tiny_b.trec'}"]
    got = _cli("metrics", "--qrels", str(tmp_path / "imported.txt"), *runs, "-k", "1,2,3", "--format", "json")
    want = _cli("metrics", "--qrels", str(expected), *runs, "-k", "1,2,3", "--format", "json")
    assert got.exit_code == want.exit_code == 0 and got.output == want.output
    rows = {(r["run"], r["measure"]): r["mean"] for r in json.loads(got.output)}
    # by hand, threshold 1: run a ranks q1 [c1 3, c2 0], q2 [c4 2, c5 1] -> precision@2 (1/2 + 2/2)/2
    # = 0.75; run b ranks q1 [c3 2, c1 3], q2 [c4 2, c6 0, c7 1] -> precision@2 (1 + 1/2)/2 = 0.75,
    # recall@1: q1 1 of 2 relevant, q2 1 of 3 -> (1/2 + 1/3)/2 = 5/12
    assert rows[("a", "precision@2")] == pytest.approx(0.75) and rows[("b", "precision@2")] == pytest.approx(0.75)
    assert rows[("b", "recall@1")] == pytest.approx(5 / 12)
    # without the changes the numbers differ (the test can fail): c2 1 makes run a's q1 precision@2 1.0
    unchanged = _reviewed_jsonl(tmp_path, {"c5": 1})
    assert _cli("labels", "import", str(unchanged), "--out", str(tmp_path / "u.txt")).exit_code == 0
    other = _cli("metrics", "--qrels", str(tmp_path / "u.txt"), *runs, "-k", "1,2,3", "--format", "json")
    assert other.output != got.output


def test_the_cli_prints_kept_changed_and_kappa(tmp_path: Path) -> None:
    result = _cli("labels", "import", str(DATA / "label_studio_export.json"), "--out", str(tmp_path / "q.txt"))
    assert result.exit_code == 0
    assert "reviewed 6 of 7 items: kept 3, changed up 1, changed down 1, graded without a proposal 1" in result.output
    assert "Cohen's kappa 0.474" in result.output and "quadratic-weighted kappa 0.528" in result.output
    assert "unreviewed 1: left out of the qrels" in result.output


# ----------------------------------------------------------------------------- malformed reviews


def _assert_rejected(tmp_path: Path, source: Path, row: int | None, field: str, words: str) -> None:
    out = tmp_path / "qrels.txt"
    out.write_text("old\n")
    with pytest.raises(InputError) as e:
        import_reviews(source, out)
    assert (e.value.line, e.value.field) == (row, field), str(e.value)
    assert words in str(e.value) and "nothing was written" in str(e.value)
    assert out.read_text() == "old\n" and not (tmp_path / "qrels.provenance.csv").exists()
    result = _cli("labels", "import", str(source), "--out", str(out))
    assert result.exit_code == 2 and result.output.count("\n") == 1 and result.output.startswith("error: ")


def test_an_unknown_item_id_is_rejected(tmp_path: Path) -> None:
    src = _reviewed_jsonl(tmp_path, {})
    lines = src.read_text().splitlines()
    row = json.loads(lines[2])
    row["id"] = "0123456789abcdef"
    lines[2] = json.dumps(row)
    src.write_text("\n".join(lines) + "\n")
    _assert_rejected(tmp_path, src, 3, "id", "unknown item id '0123456789abcdef'")


def test_a_line_json_cannot_read_is_rejected_not_a_crash(tmp_path: Path) -> None:
    src = _reviewed_jsonl(tmp_path, {})
    lines = src.read_text().splitlines()
    lines[1] = "{"  # a JSONDecodeError
    lines[2] = '{"grade": ' + "1" * 5000 + "}"  # a plain ValueError: too many digits for an int
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"line 2: not valid JSON \(Expecting .*also: line 3\)") as e:
        import_reviews(src, tmp_path / "q.txt")
    assert e.value.line == 2


def test_grade_7_is_rejected_and_every_bad_row_is_counted(tmp_path: Path) -> None:
    src = _reviewed_jsonl(tmp_path, {"c7": 7, "c6": "x"})
    # uncertainty order: c2 c5 c7 c3 c4 c1 c6 -> c7 is line 3, c6 line 7
    _assert_rejected(tmp_path, src, 3, "grade", "grade must be an integer 0-3, got 7")
    with pytest.raises(InputError, match=r"also: line 7 field 'grade'"):
        import_reviews(src, tmp_path / "q.txt")


def test_a_missing_column_is_rejected(tmp_path: Path) -> None:
    src = tmp_path / "p.csv"
    propose(TINY, src, fmt="csv")
    text = src.read_text()
    rows = list(csv.reader(io.StringIO(text)))
    drop = rows[0].index("proposed_grade")
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([r[:drop] + r[drop + 1:] for r in rows])
    src.write_text(buf.getvalue())
    _assert_rejected(tmp_path, src, None, "proposed_grade", "missing column proposed_grade")


def test_a_csv_grade_out_of_range_names_the_data_row(tmp_path: Path) -> None:
    src = tmp_path / "p.csv"
    propose(TINY, src, fmt="csv")
    rows = list(csv.reader(io.StringIO(src.read_text())))
    rows[4][rows[0].index("grade")] = "7"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    src.write_text("\ufeff" + buf.getvalue())  # a spreadsheet's BOM is fine
    _assert_rejected(tmp_path, src, 4, "grade", "got '7'")


def test_a_label_studio_export_of_another_project_is_rejected(tmp_path: Path) -> None:
    _assert_rejected(tmp_path, DATA / "label_studio_other_project.json", 1, "data.item_id",
                     "an export of another project?")


def test_reviewers_who_disagree_and_duplicates_are_rejected(tmp_path: Path) -> None:
    tasks = json.loads((DATA / "label_studio_export.json").read_text())
    tasks[6]["annotations"][1]["result"][0]["value"]["choices"] = ["3"]
    src = tmp_path / "ls.json"
    src.write_text(json.dumps(tasks))
    _assert_rejected(tmp_path, src, 7, "annotations", "the reviewers disagree (user 1: 1, user 2: 3)")
    src = _reviewed_jsonl(tmp_path, {})
    lines = src.read_text().splitlines()
    src.write_text("\n".join(lines + [lines[0]]) + "\n")
    _assert_rejected(tmp_path, src, 8, "id", "appears twice (first at line 1)")


def test_nothing_reviewed_is_an_error_not_an_empty_qrels(tmp_path: Path) -> None:
    src = tmp_path / "p.jsonl"
    propose(TINY, src)
    with pytest.raises(InputError, match="no item has a reviewer's grade"):
        import_reviews(src, tmp_path / "q.txt")
    assert not (tmp_path / "q.txt").exists()


# ----------------------------------------------------------------------------- CLI and the page file


def test_cli_propose_writes_both_files_of_a_tool_format(tmp_path: Path) -> None:
    result = _cli("labels", "propose", "--results", str(TINY), "--out", str(tmp_path / "p.json"),
                  "--format", "label-studio", "--limit", "3")
    assert result.exit_code == 0
    assert len(json.loads((tmp_path / "p.json").read_text())) == 3
    assert (tmp_path / "p.label_config.xml").read_text().startswith("<View>")
    bad = _cli("labels", "propose", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "x.csv"))
    assert bad.exit_code == 2 and "not a results folder" in bad.output and not (tmp_path / "x.csv").exists()


def test_the_review_page_is_one_self_contained_file(tmp_path: Path) -> None:
    folder = tmp_path / "res"
    shutil.copytree(TINY, folder)
    # a chunk that tries to close the script element and inject markup
    lines = (folder / "verdicts.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    row["chunk_text"] = "</script><script>alert(1)</script> & <b>bold</b> " + row["chunk_text"]
    lines[0] = json.dumps(row)
    (folder / "verdicts.jsonl").write_text("\n".join(lines) + "\n")
    result = _cli("labels", "review", "--results", str(folder), "--out", str(tmp_path / "review.html"))
    assert result.exit_code == 0
    page = (tmp_path / "review.html").read_text(encoding="utf-8")
    assert not re.search(r"https?://|<link\b|\bsrc=|@import|url\(", page), "no network, no CDN"
    assert page.count("</script>") == 2 and "alert(1)" in page  # kept as data, escaped
    data = page.split('<script type="application/json" id="data">', 1)[1].split("</script>", 1)[0]
    parsed = json.loads(data)
    assert len(parsed["items"]) == 7 and set(parsed["questions"]) == {"q1", "q2"}
    c1 = [it for it in parsed["items"] if it["chunk_id"] == "c1"][0]
    assert c1["chunk_text"].startswith("</script><script>alert(1)")


def test_write_review_page_refuses_a_folder_as_out(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        write_review_page(TINY, tmp_path)
