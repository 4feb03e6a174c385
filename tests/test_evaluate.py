"""evaluate() edge cases with the offline judge (hand-checkable, no network)."""

from __future__ import annotations

import pytest

import judge_eval
from judge_eval import Chunk, ConfigError, Dataset, InputError, Question, Run
from judge_eval.data.load import DataWarning


def _ds(**runs: dict[str, list[Chunk]]) -> Dataset:
    return Dataset(
        questions={
            "q1": Question(id="q1", question="What colour is the fish X?", reference="X is a blue fish."),
            "q2": Question(id="q2", question="Where is Y?", reference="Y is in Paris."),
            "q3": Question(id="q3", question="No reference here?"),
        },
        runs={name: Run(name=name, rankings=r) for name, r in runs.items()},
    )


def row(results, run: str, qid: str) -> dict:
    pq = results.per_question
    return pq[(pq["run"] == run) & (pq["question_id"] == qid)].iloc[0].to_dict()


def test_a_question_the_run_did_not_rank_scores_an_empty_ranking_not_nothing() -> None:
    ds = _ds(r={"q1": [Chunk(id="a", text="X is a blue fish that swims.")]})
    res = judge_eval.evaluate(ds, judge="offline", ks=(1,))
    assert row(res, "r", "q1")["context_recall@1"] == 1.0
    q2 = row(res, "r", "q2")
    assert q2["context_recall@1"] == 0.0 and q2["context_precision@1"] == 0.0
    assert q2["judge_hit_rate@1"] == 0.0
    summary = res.summary.set_index("measure")
    assert summary.loc["context_recall@1", "n"] == 2 and summary.loc["context_recall@1", "mean"] == 0.5


def test_a_question_without_reference_is_missing_with_its_reason() -> None:
    ds = _ds(r={"q1": [Chunk(id="a", text="X is a blue fish.")], "q3": [Chunk(id="b", text="Anything.")]})
    res = judge_eval.evaluate(ds, judge="offline", ks=(1,))
    reasons = res.missing[(res.missing["question_id"] == "q3")]
    assert set(reasons["reason"]) == {"no_reference"}
    assert set(reasons["measure"]) == {"context_recall@1", "context_precision@1", "judge_hit_rate@1",
                                       "judge_precision@1", "judge_recall@1", "judge_mrr@1", "judge_ndcg@1"}


def test_chunks_without_text_are_an_input_error_naming_the_run() -> None:
    ds = _ds(r={"q1": [Chunk(id="a")]})
    with pytest.raises(InputError, match="has no text"):
        judge_eval.evaluate(ds, judge="offline", ks=(1,))


def test_only_the_top_max_k_chunks_are_judged() -> None:
    chunks = [Chunk(id=f"c{i}", text=f"Sentence number {i} about fish.") for i in range(10)]
    res = judge_eval.evaluate(_ds(r={"q1": chunks}), judge="offline", ks=(1, 3))
    assert sorted(res.verdicts["chunk_id"]) == ["c0", "c1", "c2"]
    # q1 and q2 decompositions + 3 chunk verdicts
    assert res.info["accounting"]["tasks"] == 2 + 3


@pytest.mark.parametrize("ks", [(), (0,), (-1, 5), (2.5,), (True,)])
def test_bad_cutoffs_are_input_errors(ks) -> None:
    with pytest.raises(InputError, match="field 'k'"):
        judge_eval.evaluate(_ds(r={"q1": [Chunk(id="a", text="t")]}), judge="offline", ks=ks)


def test_unknown_question_in_a_run_is_left_out_with_a_warning_or_refused_when_strict() -> None:
    extra = {"x": Run(name="x", rankings={"zz": [Chunk(id="a", text="t")], "q1": [Chunk(id="b", text="X is blue.")]})}
    with pytest.warns(DataWarning, match="run 'x' ranks 1 question"):
        res = judge_eval.evaluate(_ds(), runs=extra, judge="offline", ks=(1,))
    assert set(res.per_question["question_id"]) == {"q1", "q2", "q3"}
    assert "zz" not in set(res.verdicts["question_id"])
    with pytest.raises(InputError, match="not in the dataset"):
        judge_eval.evaluate(_ds(), runs=extra, judge="offline", ks=(1,), strict=True)


@pytest.mark.parametrize(("option", "kwargs"), [
    ("--concurrency", {"concurrency": 0}),
    ("--samples", {"samples": 0}),
    ("--samples", {"samples": -3}),
    ("--timeout", {"timeout": -1}),
    ("--timeout", {"timeout": float("nan")}),
    ("--max-calls", {"budget": "calls"}),
    ("--price-in", {"pricing": "in"}),
    ("--judge-id", {"judge_id": "my-judge"}),  # the offline judge has a fixed identity
])
def test_nonsense_settings_are_config_errors_naming_the_option(option, kwargs) -> None:
    from judge_eval.run import Budget, Pricing

    with pytest.raises(ConfigError, match=f"^{option}: "):
        if kwargs.get("budget"):
            kwargs = {"budget": Budget(max_calls=-1)}
        elif kwargs.get("pricing"):
            kwargs = {"pricing": Pricing(-1.0, 0.0)}
        judge_eval.evaluate(_ds(r={"q1": [Chunk(id="a", text="t")]}), judge="offline", ks=(1,), **kwargs)


def test_labels_for_no_question_of_the_data_are_an_input_error() -> None:
    from judge_eval import Qrels

    with pytest.raises(InputError, match="none of the 1 labelled question ids"):
        judge_eval.evaluate(_ds(r={"q1": [Chunk(id="a", text="t")]}), qrels=Qrels(grades={"other": {"a": 1}}),
                            judge="offline", ks=(1,))


def _nan_cells(results) -> set[tuple[str, str, str]]:
    pq = results.per_question.set_index(["run", "question_id"])
    return {(r, q, m) for (r, q), row in pq.iterrows() for m, v in row.items() if v != v}


def _reasons(results) -> set[tuple[str, str, str]]:
    return set(zip(results.missing["run"], results.missing["question_id"], results.missing["measure"], strict=True))


def test_judge_ndcg_is_undefined_when_the_pool_holds_only_on_topic_chunks() -> None:
    # the offline judge grades this chunk 1: it shares words with the question, supports nothing
    q = Question(id="q1", question="What colour is the fish X?",
                 reference="X is a bright blue tropical fish living near Fiji.")
    run = Run(name="r", rankings={"q1": [Chunk(id="a", text="The fish X has a colour.")]})
    ds = Dataset(questions={"q1": q}, runs={"r": run})
    res = judge_eval.evaluate(ds, judge="offline", ks=(1,))
    assert res.verdicts.iloc[0]["grade"] == 1
    got = row(res, "r", "q1")
    assert got["judge_ndcg@1"] != got["judge_ndcg@1"]  # NaN, not the 1.0 a grade-1 ideal ranking gives
    assert got["judge_recall@1"] != got["judge_recall@1"]
    assert got["judge_hit_rate@1"] == 0.0 and got["judge_mrr@1"] == 0.0 and got["judge_precision@1"] == 0.0
    reasons = res.missing.set_index("measure")["reason"]
    assert reasons["judge_ndcg@1"] == "undefined: no chunk in the judged pool is relevant"


def test_every_missing_value_has_exactly_one_reason() -> None:
    from judge_eval import Qrels

    ds = _ds(r={"q1": [Chunk(id="a", text="X is a blue fish.")], "q3": [Chunk(id="b", text="Anything.")]},
             s={"q2": [Chunk(id="c", text="Y is in Paris.")]})
    res = judge_eval.evaluate(ds, qrels=Qrels(grades={"q1": {"a": 1}, "q2": {"zz": 0}}), judge="offline", ks=(1, 2))
    nan = _nan_cells(res)
    assert nan and nan == _reasons(res)
    assert len(res.missing) == len(_reasons(res))  # one reason per missing value
    by_cell = {(r, q, m): why for r, q, m, why in res.missing.itertuples(index=False)}
    assert by_cell[("r", "q3", "judge_ndcg@1")] == "no_reference"
    assert by_cell[("r", "q3", "recall@1")] == "no_human_label"
    assert by_cell[("s", "q2", "recall@1")] == "undefined: no relevant human label"


@pytest.mark.parametrize("reference", ["No Answer Present.", "  no answer present. ", "", "n/a"])
def test_a_no_answer_reference_is_no_reference_not_a_statement(reference: str) -> None:
    ds = Dataset(questions={"q1": Question(id="q1", question="Who?", reference=reference or None),
                            "q2": Question(id="q2", question="Where is Y?", reference="Y is in Paris.")},
                 runs={"r": Run(name="r", rankings={"q1": [Chunk(id="a", text="No answer present here.")],
                                                    "q2": [Chunk(id="b", text="Y is in Paris.")]})})
    markers = ("No Answer Present.", "n/a")
    if reference.strip():
        with pytest.warns(DataWarning, match="say there is no answer"):
            res = judge_eval.evaluate(ds, judge="offline", ks=(1,), no_answer=markers)
    else:
        res = judge_eval.evaluate(ds, judge="offline", ks=(1,), no_answer=markers)
    assert set(res.missing[res.missing["question_id"] == "q1"]["reason"]) == {"no_reference"}
    assert list(res.statements["question_id"].unique()) == ["q2"]  # nothing decomposed for q1
    assert res.summary.set_index("measure").loc["context_recall@1", "n"] == 1


def test_a_ragas_record_retrieving_the_same_text_twice_is_judged_once_and_keeps_both_ranks(tmp_path) -> None:
    import json

    record = {"id": "q1", "user_input": "What colour is the fish X?", "reference": "X is a blue fish.",
              "retrieved_contexts": ["X is a blue fish.", "Fish live in water.", "X is a blue fish."]}
    path = tmp_path / "ragas.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.warns(DataWarning, match=r"1 retrieved context\(s\) repeat a text .*lines 1"):
        res = judge_eval.evaluate(path, judge="offline", ks=(3,))
    assert res.info["accounting"]["tasks"] == 1 + 2  # one decomposition, two distinct texts
    ids = list(res.verdicts["chunk_id"])
    assert len(ids) == 3 and ids[2] == ids[0] + "#2"
    r = row(res, "contexts", "q1")
    assert r["context_recall@3"] == 1.0
    # useful at ranks 1 and 3: (1/1 + 2/3) / 2
    assert r["context_precision@3"] == pytest.approx((1 + 2 / 3) / 2)


def test_ragas_ids_given_twice_are_still_an_error(tmp_path) -> None:
    import json

    record = {"id": "q1", "user_input": "Q?", "reference": "R.", "retrieved_contexts": ["a", "b"],
              "retrieved_context_ids": ["c1", "c1"]}
    path = tmp_path / "ragas.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError, match="appears twice"):
        judge_eval.evaluate(path, judge="offline", ks=(3,))


@pytest.mark.parametrize("record", [
    {"id": "q1", "question": "Q?", "reference": ["A is 1.", "A equals one."], "contexts": ["A is 1."]},
    {"id": "q1", "user_input": "Q?", "reference": ["A is 1.", "A equals one."], "retrieved_contexts": ["A is 1."]},
])
def test_several_references_are_refused_with_what_to_do(record, tmp_path) -> None:
    import json

    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError, match="a list of 2 reference answers; give one string") as err:
        judge_eval.evaluate(path, judge="offline", ks=(1,))
    assert err.value.path == str(path) and err.value.line == 1 and err.value.field == "reference"
