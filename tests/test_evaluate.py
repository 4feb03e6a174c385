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
    assert set(reasons["measure"]) == {"context_recall@1", "context_precision@1"}


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
