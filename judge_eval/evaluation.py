"""``evaluate()``: the one call that loads a dataset, runs the judge, and computes every metric.

Orchestration only; each stage is a module of its own (docs/design.md):

    data/ (load + validate) -> plan.py (unique tasks) -> run.py (judge + cache, concurrency,
    budgets) -> grid.py (the verdicts per run and question) -> metrics/ (judged, judge-labelled,
    human-labelled; bootstrap CIs) -> results.py (Results) -> report/

The CLI's ``judge-eval score`` only parses arguments and calls this function.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from judge_eval.cache import CacheMode
from judge_eval.data.models import Dataset, Qrels, Run
from judge_eval.data.prepare import NO_ANSWER_MARKERS, check_texts, fingerprint, prepare_dataset
from judge_eval.errors import ConfigError, InputError, Interrupted, JudgeUnavailableError
from judge_eval.grid import VerdictGrid
from judge_eval.judge.prompts import PromptSelection, select_prompts
from judge_eval.judge.protocol import Judge
from judge_eval.metrics.evaluate_labelled import evaluate_runs
from judge_eval.metrics.judge_labelled import ir_measure_names, judge_labelled_frame, undefined_reasons
from judge_eval.metrics.judged import judged_frame
from judge_eval.metrics.labelled import check_ks
from judge_eval.metrics.missing import MissingReason
from judge_eval.metrics.stats import aggregate
from judge_eval.plan import Plan, plan_tasks
from judge_eval.results import DatasetInfo, JudgeInfo, Results, Settings, scored
from judge_eval.run import Budget, Pricing, Runner, batch_specs, run_plan

PathLike = str | os.PathLike


def default_cache_path() -> Path:
    """``$JUDGE_EVAL_CACHE`` if set, else ``~/.cache/judge-eval/responses.sqlite``."""
    env = os.environ.get("JUDGE_EVAL_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "judge-eval" / "responses.sqlite"


# ----------------------------------------------------------------------------- judge setup


def make_judge(
    judge: Judge | str | None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    cache: PathLike | Any | None = None,
    cache_mode: CacheMode = "use",
    concurrency: int = 32,
    temperature: float = 0.0,
    seed: int | None = 0,
    timeout: float = 60.0,
    judge_id: str | None = None,
    prompts: PromptSelection = None,
    reasoning_effort: str | None = None,
    api_version: str | None = None,
) -> Judge:
    """Build a judge from a name (or return the one given).

    A name is looked up in the judge registry (:mod:`judge_eval.judge.registry`): the built-ins
    ``"openai"`` (also for ``None``) and ``"offline"``, judges added with
    :func:`judge_eval.register_judge`, and installed plugins (entry-point group
    ``judge_eval.judges``); an unknown name is a :class:`ConfigError` listing the known ones.
    The OpenAI-compatible judge needs an endpoint (``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` in
    the environment, or ``base_url``) and a model; without them a :class:`ConfigError` says how to
    configure one or use the offline judge. ``judge_id`` replaces the judge identity recorded in
    results and cache keys (default ``openai:<host>/<model>``, the same for any port; see
    docs/judge.md). ``prompts`` selects prompt versions
    (:func:`~judge_eval.judge.prompts.select_prompts`). ``reasoning_effort``: sent to reasoning
    models (part of the cache key). ``api_version``: Azure OpenAI's deployment URLs (see
    docs/judge.md). A judge that caches opens and checks the cache file here, before any call is
    paid for.
    """
    if judge is not None and not isinstance(judge, str):
        own = getattr(judge, "prompts", None)
        if prompts is not None and isinstance(own, Mapping):
            wanted = {name: p.id for name, p in select_prompts(prompts).items()}
            if wanted != {name: getattr(p, "id", p) for name, p in own.items()}:
                raise ConfigError("select prompts when building the judge you pass (its prompts=), not in "
                                  "evaluate(); the judge given uses "
                                  + ", ".join(getattr(p, "id", str(p)) for p in own.values()), option="--prompt")
        return judge
    from judge_eval.judge.registry import JudgeSettings, create_judge

    settings = JudgeSettings(
        model=model, base_url=base_url, temperature=temperature, seed=seed, timeout=timeout,
        concurrency=concurrency, judge_id=judge_id, prompts=select_prompts(prompts),
        cache=cache if cache is not None else default_cache_path(), cache_mode=cache_mode,
        reasoning_effort=reasoning_effort, api_version=api_version,
    )
    return create_judge(judge or "openai", settings)


def _batch_mode(judge: Judge, batch: str | None, poll: float, progress: bool) -> Any:
    """The batch mode of ``--batch`` for ``judge`` (None: none)."""
    if batch is None:
        return None
    if batch != "openai":
        raise ConfigError(f"unknown batch mode {batch!r}; the one there is: openai", option="--batch")
    from judge_eval.judge.batch import OpenAIBatch

    return OpenAIBatch(judge, poll=poll, progress=progress,  # type: ignore[arg-type]
                       notify=lambda message: print(f"batch: {message}", file=sys.stderr, flush=True))


# ----------------------------------------------------------------------------- checks


def _check_settings(**values: Any) -> None:
    """Numeric settings of :func:`evaluate`: a ConfigError naming the option for nonsense."""
    for name, minimum in (("concurrency", 1), ("samples", 1), ("n_boot", 1), ("useful_grade", 0),
                          ("judge_relevance", 0), ("relevance_threshold", 1)):
        v = values[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ConfigError(f"must be an integer >= {minimum}, got {v!r}", option="--" + name.replace("_", "-"))
    t = values["timeout"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0 < t < float("inf")):
        raise ConfigError(f"must be a number of seconds > 0, got {t!r}", option="--timeout")


def _interrupted(judge: Judge) -> Interrupted:
    """The error for Ctrl-C: how many answers this run stored, and that a rerun resumes."""
    cache = getattr(judge, "cache", None)
    if cache is None or getattr(judge, "approximate", False):
        return Interrupted("interrupted; nothing was cached (this judge does not use the cache)")
    stored = int(getattr(cache, "writes", 0))
    return Interrupted(
        f"interrupted. {stored} judge answer{'s' * (stored != 1)} from this run are stored in the cache "
        f"({cache.path}); run the same command again to resume: cached answers are not paid for again "
        "(requests that were in flight at the interrupt were paid but not stored).",
        stored=stored,
    )


# ----------------------------------------------------------------------------- the pipeline


def _prompt_ids(judge: Any, prompts: PromptSelection, listwise: int) -> dict[str, str]:
    """The prompt ids a run used: the judge's (the listwise prompt too when chunks were judged
    listwise by a judge that can)."""
    ids = {name: p.id for name, p in getattr(judge, "prompts", select_prompts(prompts)).items()}
    listwise_prompt = getattr(judge, "listwise_prompt", None)
    if listwise > 1 and listwise_prompt is not None and getattr(getattr(judge, "transport", None), "listwise", False):
        ids["judge_chunks"] = listwise_prompt().id
    return ids


def evaluate(
    data: PathLike | Dataset,
    runs: Mapping[str, PathLike | Run] | None = None,
    qrels: PathLike | Qrels | None = None,
    *,
    corpus: PathLike | None = None,
    columns: Mapping[str, str] | None = None,
    judge: Judge | str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    ks: Sequence[int] = (5, 10),
    cache: PathLike | Any | None = None,
    cache_mode: CacheMode = "use",
    concurrency: int = 32,
    samples: int = 1,
    budget: Budget = Budget(),
    pricing: Pricing = Pricing(),
    joint: bool = False,
    useful_rule: Literal["support", "grade"] = "support",
    useful_grade: int = 2,
    judge_relevance: int = 2,
    relevance_threshold: int = 1,
    timeout: float = 60.0,
    judge_id: str | None = None,
    prompts: PromptSelection = None,
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = False,
    strict: bool = False,
    no_answer: Sequence[str] = NO_ANSWER_MARKERS,
    reasoning_effort: str | None = None,
    api_version: str | None = None,
    batch: str | None = None,
    batch_poll: float = 30.0,
    listwise: int = 1,
) -> Results:
    """Score retrieval runs with a judge (and with human labels when there are any).

    ``data``: questions with reference answers (a file path or a :class:`Dataset`); a native
    JSONL file whose lines carry ``contexts`` brings its own run, named ``contexts``.
    ``runs``: run name -> run file (TREC or native JSONL) or :class:`Run`. ``qrels``: human labels
    (optional; inline ``labels`` on questions count too). ``corpus``: chunk texts for TREC runs.
    ``columns``: the column mapping for CSV/TSV/Parquet inputs (see ``docs/formats.md``).
    ``no_answer``: reference texts that mean "there is no answer" (default MS MARCO's
    ``No Answer Present.``; an empty reference always does): such questions are scored as
    questions without a reference. ``strict``: a run that ranks a question missing from the data
    is an error instead of being left out with a warning.

    ``judge``: ``"openai"`` (any OpenAI-compatible endpoint: ``model``, ``base_url``, and
    OPENAI_API_KEY / OPENAI_BASE_URL from the environment), ``"offline"`` (deterministic lexical
    approximation, no network), the name of a judge plugin (:func:`judge_eval.register_judge`,
    entry-point group ``judge_eval.judges``; see docs/plugins.md), or a
    :class:`~judge_eval.judge.protocol.Judge` instance. ``prompts``: prompt versions, e.g.
    ``{"judge_chunk": "2"}`` or ``["judge_chunk@2"]`` (default: each task's default version);
    the ids used are recorded in ``Results.prompts``. ``reasoning_effort``: for reasoning models;
    ``api_version``: Azure OpenAI's deployment URLs (docs/judge.md).

    ``batch="openai"``: the tasks go through the OpenAI Batch API first (half the price, up to
    24 h; ``batch_poll`` seconds between looks), into the cache; what a batch does not answer is
    then asked synchronously. A killed run resumes polling the same batch (docs/judge.md, *Batch
    mode*).

    ``listwise=B``: up to B chunks of one question judged in one call (prompt ``judge_chunks``;
    judges that cannot, judge them one by one); each chunk's verdict is cached on its own, so B
    can change between runs without paying again (docs/judge.md, *Listwise judging*).

    Only the top ``max(ks)`` chunks of each ranking are judged. Metrics:

    - ``context_recall@k``, ``context_precision@k`` (and ``joint_context_recall@k`` with
      ``joint=True``): see :mod:`judge_eval.metrics.judged`; a chunk is useful when it supports a
      statement (``useful_rule="support"``) or its grade >= ``useful_grade``.
    - ``judge_hit_rate@k``, ``judge_precision@k``, ``judge_recall@k``, ``judge_mrr@K``,
      ``judge_ndcg@k``: the judge's grades used as labels (relevant iff grade >=
      ``judge_relevance``; a grade of 2 or 3 whose support claims all failed the evidence check
      counts as 1). Their recall and nDCG are relative to the judged pool: the union of the
      judged top-``max(ks)`` chunks of every run for the question. When nothing in the pool is
      relevant, hit rate and RR are 0 (every run missed) and recall and nDCG are undefined.
    - with human labels: ``hit_rate@k``, ``precision@k``, ``recall@k``, ``mrr@K``, ``ndcg@k``
      (relevant iff grade >= ``relevance_threshold``).

    Every question with a reference counts for every run; a run without a ranking for it scores
    an empty ranking there (0 where defined, as trec_eval -c). A value that a failed judge call
    would feed is missing (``Results.missing`` says why), never 0. Budgets stop scheduling new
    calls and mark the result partial.
    """
    ks = check_ks(ks)
    _check_settings(concurrency=concurrency, samples=samples, timeout=timeout, n_boot=n_boot,
                    useful_grade=useful_grade, judge_relevance=judge_relevance,
                    relevance_threshold=relevance_threshold)
    if batch is not None and (budget.max_calls, budget.max_tokens, budget.max_cost) != (None, None, None):
        raise ConfigError("a batch cannot be stopped half-way, so budgets cannot be kept: drop --max-calls, "
                          "--max-tokens and --max-cost, or --batch", option="--batch")
    ds, plan = _prepare_plan(data, runs, qrels, corpus, columns, ks, joint, strict, no_answer)
    runner_args = dict(concurrency=concurrency, samples=samples, budget=budget, pricing=pricing, progress=progress,
                       listwise=listwise)
    judge_obj = make_judge(judge, model=model, base_url=base_url, cache=cache, cache_mode=cache_mode,
                           concurrency=concurrency, timeout=timeout, judge_id=judge_id, prompts=prompts,
                           reasoning_effort=reasoning_effort, api_version=api_version)
    runner_args["batch"] = _batch_mode(judge_obj, batch, batch_poll, progress)
    runner = Runner(judge_obj, **runner_args)  # type: ignore[arg-type]
    approximate = bool(getattr(judge_obj, "approximate", False))
    labels = ds.labels()
    judge_info = JudgeInfo(identity=judge_obj.identity, approximate=approximate)
    prompt_ids = _prompt_ids(judge_obj, prompts, listwise)
    dataset_info = DatasetInfo(
        fingerprint=fingerprint(ds),
        questions=len(ds.questions),
        questions_with_reference=sum(1 for q in ds.questions.values() if q.reference),
        runs=list(ds.runs),
        human_labels=0 if labels is None else len(labels),
        questions_fingerprint=fingerprint(ds, runs=False),
    )
    settings = Settings(
        ks=ks, samples=samples, joint=joint, useful_rule=useful_rule, useful_grade=useful_grade,
        judge_relevance=judge_relevance, relevance_threshold=relevance_threshold, n_boot=n_boot, seed=seed,
        concurrency=concurrency, cache_mode="n/a" if approximate else cache_mode,
        budget={"max_calls": budget.max_calls, "max_tokens": budget.max_tokens, "max_cost": budget.max_cost},
        pricing={"input_per_million": pricing.input_per_million, "output_per_million": pricing.output_per_million},
    )
    try:
        outcome = run_plan(runner, plan)
    except KeyboardInterrupt:
        raise _interrupted(judge_obj) from None
    except JudgeUnavailableError as exc:  # say what was being scored (an audit records it)
        exc.info = scored(judge_info, prompt_ids, dataset_info, settings)
        raise
    grid = VerdictGrid(ds, outcome, ks, joint)

    judged, judged_missing = judged_frame(grid, useful_rule=useful_rule, useful_grade=useful_grade)
    judge_labelled, judge_missing = judge_labelled_frame(grid, judge_relevance)
    frames = [judged, judge_labelled]
    missing_frames = [judged_missing, judge_missing]
    if labels is not None and len(labels) > 0:
        labelled = [qid for qid in ds.questions if labels.for_question(qid)]
        human = evaluate_runs(ds.runs, labels, measures=ir_measure_names(ks), ks=ks,
                              threshold=relevance_threshold, questions=labelled)
        frames.append(human)
        missing_frames.append(undefined_reasons(human, MissingReason.NO_RELEVANT_LABEL.value))
        unlabelled = [qid for qid in ds.questions if not labels.for_question(qid)]
        missing_frames.append(pd.DataFrame(
            [{"run": name, "question_id": qid, "measure": m, "reason": MissingReason.NO_HUMAN_LABEL.value}
             for name in ds.runs for qid in unlabelled for m in human.columns[2:]],
            columns=["run", "question_id", "measure", "reason"]))
    per_question = frames[0]
    for f in frames[1:]:
        per_question = per_question.merge(f, on=["run", "question_id"], how="outer", sort=False)
    per_question = _order_rows(per_question, ds)
    verdicts = grid.verdict_frame()
    judged_trust = None
    if labels is not None and len(labels) > 0:
        from judge_eval.metrics.trust import trust  # scipy: about a second of CPU, only with human labels

        judged_trust = trust(per_question, verdicts, labels, judge_relevance=judge_relevance,
                             relevance_threshold=relevance_threshold, n_boot=n_boot, seed=seed)
    return Results(
        summary=aggregate(per_question, by=["run"], n_boot=n_boot, seed=seed),
        per_question=per_question,
        missing=pd.concat(missing_frames, ignore_index=True),
        verdicts=verdicts,
        statements=grid.statement_frame(),
        judge=judge_info,
        prompts=prompt_ids,
        dataset=dataset_info,
        settings=settings,
        accounting=outcome.accounting,
        trust=judged_trust,
    )


def _prepare_plan(data: PathLike | Dataset, runs: Mapping[str, PathLike | Run] | None, qrels: PathLike | Qrels | None,
                  corpus: PathLike | None, columns: Mapping[str, str] | None, ks: list[int], joint: bool,
                  strict: bool, no_answer: Sequence[str]) -> tuple[Dataset, Plan]:
    """The dataset, checked, and the plan of its unique judge tasks down to ``max(ks)``."""
    ds = prepare_dataset(data, runs, qrels, corpus, columns, strict=strict, no_answer=no_answer)
    if not ds.runs:
        raise InputError("nothing to score: give at least one run (or contexts in the data file)", field="runs")
    check_texts(ds, ks[-1])
    return ds, plan_tasks(ds, ks, joint)


@dataclass(frozen=True)
class BatchExport:
    """What :func:`export_batch` wrote: ``written`` request lines (``batch``: the id recorded in
    the cache), ``answered`` tasks the cache already holds, and ``waiting`` chunk tasks whose
    reference is not decomposed yet (import the answers, then export again)."""

    written: int
    answered: int
    waiting: int
    batch: str | None


def export_batch(
    data: PathLike | Dataset,
    runs: Mapping[str, PathLike | Run] | None = None,
    qrels: PathLike | Qrels | None = None,
    *,
    out: PathLike,
    corpus: PathLike | None = None,
    columns: Mapping[str, str] | None = None,
    judge: Judge | str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    ks: Sequence[int] = (5, 10),
    cache: PathLike | Any | None = None,
    cache_mode: CacheMode = "use",
    samples: int = 1,
    joint: bool = False,
    judge_id: str | None = None,
    prompts: PromptSelection = None,
    reasoning_effort: str | None = None,
    api_version: str | None = None,
    strict: bool = False,
    no_answer: Sequence[str] = NO_ANSWER_MARKERS,
) -> BatchExport:
    """Write the unique judge tasks :func:`evaluate` would ask and the cache does not hold as a
    batch-request JSONL (OpenAI's batch format, which ``vllm run-batch`` reads) to ``out``, and
    record them in the cache for ``judge-eval batch import``. Give it the judge options
    ``evaluate`` will get (model, base URL, judge id, prompts, samples): they make the cache
    keys. A chunk task needs its reference's statements, so a cold cache takes two rounds:
    decompositions first, then (after importing their answers) the chunk tasks."""
    from judge_eval.judge.batch import TaskSpec, cached_value, export_requests, pending_items

    ks = check_ks(ks)
    _check_settings(concurrency=1, samples=samples, timeout=60.0, n_boot=1, useful_grade=0, judge_relevance=0,
                    relevance_threshold=1)
    _, plan = _prepare_plan(data, runs, qrels, corpus, columns, ks, joint, strict, no_answer)
    judge_obj = make_judge(judge, model=model, base_url=base_url, cache=cache, cache_mode=cache_mode,
                           judge_id=judge_id, prompts=prompts, reasoning_effort=reasoning_effort,
                           api_version=api_version)
    specs = batch_specs(plan, samples)
    statements = {}
    for spec in specs:
        value = cached_value(judge_obj, spec)  # type: ignore[arg-type]
        if value is not None:
            statements[spec.inputs["reference"]] = value.statements
    chunk_specs = batch_specs(plan, samples, statements)
    waiting = (len(plan.chunk_tasks) + len(plan.joint_tasks)) * samples - len(chunk_specs)
    every: list[TaskSpec] = [*specs, *chunk_specs]
    pending = len(pending_items(judge_obj, every))  # type: ignore[arg-type]
    written = export_requests(judge_obj, every, out)  # type: ignore[arg-type]
    return BatchExport(written=written.written, answered=len(every) - pending, waiting=waiting,
                       batch=written.batch)


def _order_rows(frame: pd.DataFrame, ds: Dataset) -> pd.DataFrame:
    run_order = {name: i for i, name in enumerate(ds.runs)}
    q_order = {qid: i for i, qid in enumerate(ds.questions)}
    key = (frame["run"].map(run_order).fillna(len(run_order)) * (len(q_order) + 1)
           + frame["question_id"].map(q_order).fillna(len(q_order)))
    return frame.assign(_k=key).sort_values("_k", kind="stable").drop(columns="_k").reset_index(drop=True)
