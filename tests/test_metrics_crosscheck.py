"""Cross-check the labelled measures against independent implementations, within 1e-9.

* trec_eval (through pytrec-eval-terrier): P_k, recall_k, ndcg_cut_k, map, map_cut_k,
  recip_rank (and recip_rank on runs truncated to k, for RR@k), Rprec, success_k; with
  ``relevance_level`` 1 and 2.
* ranx: hit_rate, precision, recall, mrr, map, ndcg, ndcg_burges (exp gain), r-precision;
  ``-l1``/``-l2`` for the threshold. ranx is run in a subprocess with ``NUMBA_DISABLE_JIT=1``:
  the same Python source, without a ~30 s numba compile on a fresh machine.
* ir_measures: ``Judged@k`` (its own provider) and ``RR(rel=...)@k`` (the MS MARCO provider).
* the whole-run path (TREC files read as columns, ``evaluate_runs`` vectorised) against trec_eval.

Convention differences, mapped here and documented in docs/metrics.md:

* where we return None (no relevant label, or IDCG = 0), the libraries return 0;
* nDCG uses raw grades whatever the threshold (trec_eval); ranx drops grades below its
  ``rel_lvl``, so ranx's nDCG is compared at ``-l1`` for both thresholds;
* ``judged@k`` divides by k; ir_measures' ``Judged@k`` divides by min(k, n).

Scores strictly decrease with rank, so no library's tie-breaking can reorder a ranking.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable

import ir_measures
import pytest
import pytrec_eval

from judge_eval.metrics import labelled as L

KS = (1, 3, 5, 10, 20)
THRESHOLDS = (1, 2)
N_QUERIES = 240
TOL = 1e-9


def _make_data(seed: int = 20240531) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Random qrels and one run: grades 0..3, 1-10 labels per query from a pool of 30 chunks
    (so many retrieved chunks are unlabelled), rankings of 1-25 chunks (often shorter than k).
    Some queries only have grade-0 labels, some only grade <= 1 (no relevant chunk at
    threshold 2)."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for i in range(N_QUERIES):
        qid = f"q{i:03d}"
        pool = [f"d{j}" for j in range(30)]
        labelled = rng.sample(pool, rng.randint(1, 10))
        kind = i % 6
        if kind == 0:
            grades = {c: 0 for c in labelled}
        elif kind == 1:
            grades = {c: rng.randint(0, 1) for c in labelled}
        else:
            grades = {c: rng.randint(0, 3) for c in labelled}
        qrels[qid] = grades
        # Rankings favour labelled chunks a little so that hits are common.
        weights = [3.0 if c in grades else 1.0 for c in pool]
        ranking: list[str] = []
        length = rng.choice([1, 2, 4, 7, 12, 25, rng.randint(1, 25)])
        while len(ranking) < length:
            c = rng.choices(pool, weights)[0]
            if c not in ranking:
                ranking.append(c)
        run[qid] = ranking
    return qrels, run


QRELS, RUN = _make_data()


def _scored(run: dict[str, list[str]], k: int | None = None) -> dict[str, dict[str, float]]:
    """Rankings as {qid: {doc: score}} with strictly decreasing scores (rank 1 = 1000)."""
    return {
        q: {c: float(1000 - i) for i, c in enumerate(r if k is None else r[:k])}
        for q, r in run.items()
    }


def _ours(func: Callable[[list[str], dict[str, int]], float | None]) -> dict[str, float | None]:
    return {q: func(RUN[q], QRELS[q]) for q in RUN}


def _compare(
    ours: dict[str, float | None],
    theirs: dict[str, float],
    *,
    undefined_ok: Callable[[str], bool],
    what: str,
) -> None:
    """Equal within TOL; where ours is None, theirs must be 0 and the reason must hold."""
    assert set(theirs) == set(ours), what
    for q, ours_v in ours.items():
        if ours_v is None:
            assert undefined_ok(q), f"{what} {q}: undefined without reason"
            assert theirs[q] == 0.0, f"{what} {q}: library gives {theirs[q]}"
        else:
            assert math.isclose(ours_v, theirs[q], rel_tol=0, abs_tol=TOL), (
                f"{what} {q}: ours {ours_v} vs {theirs[q]}; ranking {RUN[q]}, grades {QRELS[q]}"
            )


def _no_relevant(threshold: int) -> Callable[[str], bool]:
    return lambda q: L.num_relevant(QRELS[q], threshold) == 0


def _no_gain(q: str) -> bool:
    return all(g == 0 for g in QRELS[q].values())


def test_generated_data_covers_edge_cases() -> None:
    lengths = [len(r) for r in RUN.values()]
    assert len(RUN) >= 200
    assert sum(1 for q in RUN if _no_gain(q)) >= 20
    assert sum(1 for q in RUN if _no_relevant(2)(q) and not _no_gain(q)) >= 20
    assert sum(1 for n in lengths if n < 5) >= 40 and sum(1 for n in lengths if n < 20) >= 100
    assert max(lengths) >= 20
    assert {g for grades in QRELS.values() for g in grades.values()} == {0, 1, 2, 3}
    # enough non-trivial values to make the comparison mean something
    assert sum(1 for q in RUN if (L.reciprocal_rank(RUN[q], QRELS[q]) or 0) > 0) >= 100


# --------------------------------------------------------------------------- trec_eval


@pytest.fixture(scope="module")
def trec() -> dict[int, dict[str, dict[str, float]]]:
    """trec_eval per-query results, by relevance level."""
    cut = ",".join(str(k) for k in KS)
    measures = {f"P.{cut}", f"recall.{cut}", f"ndcg_cut.{cut}", f"map_cut.{cut}",
                f"success.{cut}", "map", "recip_rank", "Rprec"}
    out = {}
    for level in THRESHOLDS:
        ev = pytrec_eval.RelevanceEvaluator(QRELS, measures, relevance_level=level)
        out[level] = ev.evaluate(_scored(RUN))
    return out


@pytest.fixture(scope="module")
def trec_rr_at_k() -> dict[tuple[int, int], dict[str, float]]:
    """trec_eval recip_rank on runs truncated to k: RR@k computed independently of ranx."""
    out = {}
    for level in THRESHOLDS:
        ev = pytrec_eval.RelevanceEvaluator(QRELS, {"recip_rank"}, relevance_level=level)
        for k in KS:
            res = ev.evaluate(_scored(RUN, k))
            out[(level, k)] = {q: v["recip_rank"] for q, v in res.items()}
    return out


def _col(results: dict[str, dict[str, float]], key: str) -> dict[str, float]:
    return {q: v[key] for q, v in results.items()}


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("k", KS)
def test_cutoff_measures_match_trec_eval(trec, k: int, threshold: int) -> None:
    res = trec[threshold]
    t = threshold
    cases = [
        ("P", _ours(lambda r, g: L.precision(r, g, k, t)), lambda q: False),
        ("recall", _ours(lambda r, g: L.recall(r, g, k, t)), _no_relevant(t)),
        ("success", _ours(lambda r, g: L.hit_rate(r, g, k, t)), _no_relevant(t)),
        ("map_cut", _ours(lambda r, g: L.average_precision(r, g, k, t)), _no_relevant(t)),
        ("ndcg_cut", _ours(lambda r, g: L.ndcg(r, g, k)), _no_gain),
    ]
    for name, ours, why in cases:
        _compare(ours, _col(res, f"{name}_{k}"), undefined_ok=why, what=f"{name}_{k}@l{t}")


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_uncut_measures_match_trec_eval(trec, threshold: int) -> None:
    res = trec[threshold]
    t = threshold
    cases = [
        ("map", _ours(lambda r, g: L.average_precision(r, g, None, t))),
        ("recip_rank", _ours(lambda r, g: L.reciprocal_rank(r, g, None, t))),
        ("Rprec", _ours(lambda r, g: L.r_precision(r, g, t))),
    ]
    for name, ours in cases:
        _compare(ours, _col(res, name), undefined_ok=_no_relevant(t), what=f"{name}@l{t}")


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("k", KS)
def test_rr_at_k_matches_trec_eval_on_truncated_runs(trec_rr_at_k, k: int, threshold: int) -> None:
    ours = _ours(lambda r, g: L.reciprocal_rank(r, g, k, threshold))
    _compare(ours, trec_rr_at_k[(threshold, k)], undefined_ok=_no_relevant(threshold),
             what=f"RR@{k}@l{threshold}")


# --------------------------------------------------------------------------- ranx

_RANX_SCRIPT = r"""
import json, sys
from ranx import Qrels, Run, evaluate
data = json.load(open(sys.argv[1]))
qrels, run = Qrels(data["qrels"]), Run(data["run"])
evaluate(qrels, run, data["metrics"], save_results_in_run=True)
print(json.dumps({m: {q: float(v) for q, v in run.scores[m].items()} for m in data["metrics"]}))
"""


@pytest.fixture(scope="module")
def ranx_scores(tmp_path_factory) -> dict[str, dict[str, float]]:
    metrics = ["r-precision-l1", "r-precision-l2", "mrr-l1", "mrr-l2", "map-l1", "map-l2"]
    for k in KS:
        for level in THRESHOLDS:
            metrics += [f"{m}@{k}-l{level}" for m in
                        ("hit_rate", "precision", "recall", "mrr", "map")]
        metrics += [f"ndcg@{k}-l1", f"ndcg_burges@{k}-l1"]
    path = tmp_path_factory.mktemp("ranx") / "input.json"
    path.write_text(json.dumps({"qrels": QRELS, "run": _scored(RUN), "metrics": metrics}))
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    proc = subprocess.run([sys.executable, "-c", _RANX_SCRIPT, str(path)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("k", KS)
def test_cutoff_measures_match_ranx(ranx_scores, k: int, threshold: int) -> None:
    t = threshold
    cases = [
        ("hit_rate", _ours(lambda r, g: L.hit_rate(r, g, k, t)), _no_relevant(t)),
        ("precision", _ours(lambda r, g: L.precision(r, g, k, t)), lambda q: False),
        ("recall", _ours(lambda r, g: L.recall(r, g, k, t)), _no_relevant(t)),
        ("mrr", _ours(lambda r, g: L.reciprocal_rank(r, g, k, t)), _no_relevant(t)),
        ("map", _ours(lambda r, g: L.average_precision(r, g, k, t)), _no_relevant(t)),
    ]
    for name, ours, why in cases:
        key = f"{name}@{k}-l{t}"
        _compare(ours, ranx_scores[key], undefined_ok=why, what=f"ranx {key}")


@pytest.mark.parametrize("k", KS)
def test_ndcg_variants_match_ranx(ranx_scores, k: int) -> None:
    # Our nDCG ignores the threshold, so one comparison covers both thresholds.
    _compare(_ours(lambda r, g: L.ndcg(r, g, k)), ranx_scores[f"ndcg@{k}-l1"],
             undefined_ok=_no_gain, what=f"ranx ndcg@{k}")
    _compare(_ours(lambda r, g: L.ndcg(r, g, k, gain="exp")), ranx_scores[f"ndcg_burges@{k}-l1"],
             undefined_ok=_no_gain, what=f"ranx ndcg_burges@{k}")


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_uncut_measures_match_ranx(ranx_scores, threshold: int) -> None:
    t = threshold
    cases = [
        ("r-precision", _ours(lambda r, g: L.r_precision(r, g, t))),
        ("mrr", _ours(lambda r, g: L.reciprocal_rank(r, g, None, t))),
        ("map", _ours(lambda r, g: L.average_precision(r, g, None, t))),
    ]
    for name, ours in cases:
        key = f"{name}-l{t}"
        _compare(ours, ranx_scores[key], undefined_ok=_no_relevant(t), what=f"ranx {key}")


# --------------------------------------------------------------------------- ir_measures


def _ir_measures(measure: object) -> dict[str, float]:
    qrels = [ir_measures.Qrel(q, c, g) for q, grades in QRELS.items() for c, g in grades.items()]
    run = [ir_measures.ScoredDoc(q, c, s) for q, docs in _scored(RUN).items()
           for c, s in docs.items()]
    return {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}


@pytest.mark.parametrize("k", KS)
def test_judged_matches_ir_measures_up_to_the_denominator(k: int) -> None:
    theirs = _ir_measures(ir_measures.Judged @ k)
    # ir_measures divides by min(k, n); we divide by k (as precision@k does).
    rescaled = {q: v * min(k, len(RUN[q])) / k for q, v in theirs.items()}
    _compare(_ours(lambda r, g: L.judged(r, g, k)), rescaled, undefined_ok=lambda q: False,
             what=f"Judged@{k}")


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("k", (3, 10))
def test_rr_matches_ir_measures_msmarco(k: int, threshold: int) -> None:
    theirs = _ir_measures(ir_measures.RR(rel=threshold) @ k)
    ours = _ours(lambda r, g: L.reciprocal_rank(r, g, k, threshold))
    _compare(ours, theirs, undefined_ok=_no_relevant(threshold), what=f"msmarco RR@{k}")


# --------------------------------------------------------------------------- the whole-run path


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory) -> dict[int, dict[str, dict[str, float]]]:
    """The same data through the TREC files, the columnar readers and the vectorised
    evaluate_runs: per threshold, measure label -> {question: value}."""
    from judge_eval.data.columns import read_trec_qrels_columns, read_trec_run_columns
    from judge_eval.metrics.evaluate_labelled import evaluate_runs

    folder = tmp_path_factory.mktemp("trec")
    (folder / "qrels.txt").write_text("".join(f"{q} 0 {c} {g}\n" for q, grades in QRELS.items()
                                              for c, g in grades.items()))
    (folder / "run.trec").write_text("".join(f"{q} Q0 {c} {i + 1} {1000 - i} t\n" for q, ranking in RUN.items()
                                             for i, c in enumerate(ranking)))
    run = read_trec_run_columns(folder / "run.trec")
    qrels = read_trec_qrels_columns(folder / "qrels.txt")
    out = {}
    for level in THRESHOLDS:
        frame = evaluate_runs({"r": run}, qrels, ["hit_rate", "precision", "recall", "ndcg", "map", "mrr",
                                                   "r_precision"], ks=KS, threshold=level)
        out[level] = {col: dict(zip(frame["question_id"], frame[col], strict=True))
                      for col in frame.columns[2:]}
    return out


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_whole_run_path_matches_trec_eval(trec, whole_run, threshold: int) -> None:
    ours = whole_run[threshold]
    none = _no_relevant(threshold)
    pairs = [("map", "map", none), ("mrr", "recip_rank", none), ("r_precision", "Rprec", none)]
    for k in KS:
        pairs += [(f"hit_rate@{k}", f"success_{k}", none), (f"precision@{k}", f"P_{k}", lambda q: False),
                  (f"recall@{k}", f"recall_{k}", none), (f"ndcg@{k}", f"ndcg_cut_{k}", _no_gain)]
    for label, key, why in pairs:
        values = {q: None if math.isnan(v) else v for q, v in ours[label].items()}
        _compare(values, _col(trec[threshold], key), undefined_ok=why, what=f"whole run {label}@l{threshold}")
