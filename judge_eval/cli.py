"""The ``judge-eval`` command line. Thin: it parses arguments and calls the Python API.

Exit codes (:class:`judge_eval.errors.ExitCode`): 0 done; 2 bad input or configuration (one
message, nothing written); 3 the judge did not deliver (refused or unreachable, too many failed
items, or a budget reached); 70 a bug in judge-eval (with its traceback); 130 interrupted.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from judge_eval.errors import ConfigError, DataWarning, ExitCode, InputError, JudgeEvalError

# ----------------------------------------------------------------------------- helpers


def _fail(message: str, code: int = ExitCode.USAGE) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(int(code))


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Warnings reach the terminal as one line, ``warning: ...``, without a source line."""
    click.echo(f"warning: {message}", err=True)


class _Group(click.Group):
    """The command group: every failure becomes one message and a documented exit code. Commands
    therefore just call the Python API: a :class:`JudgeEvalError` they raise is reported here."""

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            # our warnings about the user's data, each time; libraries' deprecation notes are
            # for us, not for the user
            warnings.simplefilter("ignore")
            warnings.simplefilter("always", DataWarning)
            warnings.showwarning = _show_warning
            try:
                return super().invoke(ctx)
            except (click.exceptions.Exit, click.ClickException, click.Abort):
                raise
            except JudgeEvalError as exc:
                click.echo(f"error: {exc}", err=True)
                ctx.exit(int(exc.exit_code))
            except KeyboardInterrupt:
                click.echo("interrupted", err=True)
                ctx.exit(int(ExitCode.INTERRUPTED))
            except Exception:
                click.echo(traceback.format_exc(), err=True, nl=False)
                click.echo("error: this is a bug in judge-eval (the traceback above says where); "
                           "please report it", err=True)
                ctx.exit(int(ExitCode.INTERNAL))


def parse_ks(text: str) -> list[int]:
    """``"1,3,5"`` -> ``[1, 3, 5]``; every k must be an integer >= 1 (no empty items)."""
    ks: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            shown = repr(part) if part else "an empty item"
            raise ConfigError(f"{shown} in {text!r} is not an integer >= 1; write e.g. -k 5,10", option="-k")
        ks.append(int(part))
    return sorted(dict.fromkeys(ks))


def parse_runs(specs: Sequence[str]) -> dict[str, str]:
    """``NAME=PATH`` (or just ``PATH``: the name is the file name without extension)."""
    runs: dict[str, str] = {}
    for spec in specs:
        if "=" in spec and not Path(spec).exists():
            name, path = spec.split("=", 1)
        else:
            name, path = Path(spec).stem, spec
        if not name:
            raise InputError(f"--run {spec!r}: the run name before '=' is empty", field="run")
        if name in runs:
            raise InputError(f"--run {spec!r}: two runs are named {name!r}", field="run")
        if not Path(path).is_file():
            raise InputError("file not found", path=path, field="run")
        runs[name] = path
    return runs


def parse_columns(text: str | None) -> dict[str, str] | None:
    """``"question_id=qid,chunk_id=doc"`` -> ``{"question_id": "qid", "chunk_id": "doc"}``."""
    if not text:
        return None
    mapping: dict[str, str] = {}
    for part in text.split(","):
        key, sep, column = part.partition("=")
        if not sep or not key.strip() or not column.strip():
            raise InputError(f"--columns: {part!r} is not KEY=COLUMN", field="columns")
        mapping[key.strip()] = column.strip()
    return mapping


class _FiniteRange(click.FloatRange):
    """A float range that also refuses NaN and infinity."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if rv != rv or rv in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


#: numeric option types: out-of-range values are a usage error (exit 2) naming the option
_POSITIVE_INT = click.IntRange(min=1)
_COUNT = click.IntRange(min=0)
_MONEY = _FiniteRange(min=0)
_SECONDS = _FiniteRange(min=0, min_open=True, max=86400)


def _judge_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--judge``: a name in the judge registry (built-ins, register_judge(), installed plugins)."""
    from judge_eval.judge.registry import judge_names

    names = judge_names()
    if value not in names:
        raise click.BadParameter(f"unknown judge {value!r}; known judges: {', '.join(names)} "
                                 "(a plugin adds one: see docs/plugins.md)", ctx, param)
    return value


def _prompt_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """``--prompt NAME@VERSION``: shipped prompt versions, at most one per prompt name."""
    from judge_eval.judge.prompts import select_prompts

    try:
        select_prompts(list(value))
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("--prompt: "), ctx, param) from None
    return value


_reasoning_effort_option = click.option(
    "--reasoning-effort", type=click.Choice(["none", "minimal", "low", "medium", "high", "xhigh"]),
    help="Reasoning models (o-series, gpt-5): how hard to think. Part of the cache key; a model that refuses it "
         "fails with http_400.")
_api_version_option = click.option(
    "--api-version", metavar="VERSION",
    help="Azure OpenAI deployment URLs: the api-version (e.g. 2024-10-21); then --base-url is the resource endpoint "
         "(or AZURE_OPENAI_ENDPOINT), --model the deployment, the key AZURE_OPENAI_API_KEY or the Entra ID token "
         "AZURE_OPENAI_AD_TOKEN.")


# ----------------------------------------------------------------------------- commands


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="judge-eval")
def main() -> None:
    """Score RAG retrieval with an LLM judge when nobody labelled the chunks, and with human
    labels (qrels) when somebody did."""


@main.command()
@click.option("--qrels", required=True, type=click.Path(dir_okay=False), help="Human labels: TREC qrels, JSONL "
                                                                              "or CSV/Parquet.")
@click.option("--run", "run_specs", multiple=True, required=True, metavar="NAME=PATH",
              help="A run (TREC or native JSONL); repeat for several runs.")
@click.option("-k", "ks", default="1,3,5,10", show_default=True, help="Cutoffs, comma-separated.")
@click.option("--measures", default="hit_rate,precision,recall,mrr,ndcg", show_default=True,
              help="Comma-separated: hit_rate, precision, recall, mrr, ndcg, ndcg_exp, ndcg_jarvelin, "
                   "map, r_precision, judged; NAME@K for one cutoff.")
@click.option("--threshold", default=1, show_default=True, type=_POSITIVE_INT, help="Relevant iff grade >= threshold.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="table: aligned text for people; csv and json: every statistic (mean, n, n_missing, CI) for tools.")
@click.option("--ci", is_flag=True, help="Show 95% bootstrap confidence intervals in the table.")
@click.option("--per-question", is_flag=True, help="Print one row per (run, question) instead of the summary.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write to FILE instead of standard output (replaced atomically if it exists; never a folder).")
@click.option("--seed", default=0, show_default=True, type=_COUNT, help="Seed of the bootstrap.")
@click.option("--columns", metavar="KEY=COL,...",
              help="Column mapping for CSV/TSV/Parquet inputs, e.g. question_id=qid,chunk_id=doc,rank=pos "
                   "(keys: question_id, chunk_id, rank, score, text, grade, question, reference).")
def metrics(qrels: str, run_specs: tuple[str, ...], ks: str, measures: str, threshold: int, fmt: str,
            ci: bool, per_question: bool, out: str | None, seed: int, columns: str | None) -> None:
    """Labelled metrics for several runs side by side (like trec_eval, for several runs at once).

    \b
    Example:
      judge-eval metrics --qrels fixtures/clapnq/qrels.txt \\
        --run bm25=fixtures/clapnq/runs/bm25.trec --run dense=fixtures/clapnq/runs/dense.trec

    Every question with at least one label counts; a run without a ranking for it scores 0
    there (trec_eval -c), with a warning. Undefined values (e.g. recall with no relevant label)
    are left out of the mean and counted as n_missing.
    """
    from judge_eval.atomic import check_file, write_text
    from judge_eval.labelled import evaluate_labelled
    from judge_eval.report.tables import render, render_per_question

    def run() -> str:
        k_list = parse_ks(ks)
        if out:
            check_file(out)
        result = evaluate_labelled(qrels, parse_runs(run_specs), measures=measures, ks=k_list,
                                   threshold=threshold, columns=parse_columns(columns), seed=seed)
        if per_question:
            return render_per_question(result.per_question, fmt)  # type: ignore[arg-type]
        return render(result.summary, fmt, with_ci=ci)  # type: ignore[arg-type]

    text = run()
    if out:
        write_text(out, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


@main.command()
@click.option("--data", required=True, type=click.Path(dir_okay=False),
              help="Questions with reference answers: native JSONL (may carry 'contexts'), RAGAS records, CSV/Parquet.")
@click.option("--run", "run_specs", multiple=True, metavar="NAME=PATH", help="A run file; repeat for several runs.")
@click.option("--qrels", type=click.Path(dir_okay=False), help="Human labels (optional): adds labelled metrics.")
@click.option("--corpus", type=click.Path(dir_okay=False), help="Chunk texts (JSONL id,text) for TREC runs.")
@click.option("--judge", "judge_name", default="openai", show_default=True, metavar="NAME", callback=_judge_name,
              help="openai: any OpenAI-compatible endpoint; offline: deterministic lexical approximation, no network; "
                   "or an installed judge plugin (docs/plugins.md).")
@click.option("--model", help="Judge model name (openai judge). Env: JUDGE_EVAL_MODEL.")
@click.option("--base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1. Env: OPENAI_BASE_URL.")
@click.option("--judge-id", metavar="NAME",
              help="Name this judge in results and cache keys (default openai:<host>/<model>, the same on any port). "
                   "Give two endpoints serving the same model the same name to share cached answers.")
@click.option("--prompt", "prompt_ids", multiple=True, metavar="NAME@VERSION", callback=_prompt_ids,
              help="Use this prompt version, e.g. judge_chunk@2 (repeat for several prompts; default: "
                   "decompose@1, judge_chunk@1). Recorded in the results; each version has its own cache entries.")
@click.option("-k", "ks", default="5,10", show_default=True, help="Cutoffs, comma-separated; the top max(k) "
                                                                  "chunks are judged.")
@click.option("--out", type=click.Path(), metavar="DIR",
              help="Write the results folder here. An earlier results folder is replaced; a folder holding other "
                   "files is refused (see --force). Checked before any judge call.")
@click.option("--force", is_flag=True,
              help="With --out: write the result files into an existing folder that holds other files (they are kept).")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="Response cache (SQLite). Default: $JUDGE_EVAL_CACHE or ~/.cache/judge-eval/responses.sqlite.")
@click.option("--cache-mode", type=click.Choice(["use", "refresh", "replay", "off"]), default="use", show_default=True,
              help="use: read and write; refresh: ask again and overwrite; replay: cached answers only, no request "
                   "(a miss is a judge error); off: no cache.")
@click.option("--concurrency", default=32, show_default=True, type=_POSITIVE_INT,
              help="Judge calls in flight at once (see docs/judge.md, *Concurrency*).")
@click.option("--samples", default=1, show_default=True, type=_POSITIVE_INT,
              help="Ask the judge N times per chunk; majority vote.")
@click.option("--listwise", default=1, show_default=True, type=_POSITIVE_INT, metavar="B",
              help="Judge up to B chunks of a question in one call (fewer calls and prompt tokens); each chunk's "
                   "verdict is cached on its own, so B can change between runs without paying again.")
@click.option("--joint", is_flag=True, help="Also compute joint context recall (top-k judged as one context).")
@click.option("--useful", "useful_rule", type=click.Choice(["support", "grade"]), default="support", show_default=True,
              help="A chunk is useful for context precision when it supports a statement, or when its grade >= 2.")
@click.option("--max-calls", type=_COUNT, help="Stop scheduling new judge calls after this many.")
@click.option("--max-tokens", type=_COUNT, help="Stop scheduling new judge calls after this many tokens.")
@click.option("--max-cost", type=_MONEY, help="Stop scheduling new judge calls after this cost (USD).")
@click.option("--max-errors", default="5%", show_default=True, metavar="SHARE|COUNT",
              help="Failed judge tasks tolerated before the run exits 3: a share (5%, 0.05) or a count (0, 10).")
@click.option("--price-in", default=0.0, show_default=True, type=_MONEY, help="USD per million prompt tokens.")
@click.option("--price-out", default=0.0, show_default=True, type=_MONEY, help="USD per million completion tokens.")
@click.option("--timeout", default=60.0, show_default=True, type=_SECONDS, help="Seconds per judge request.")
@_reasoning_effort_option
@_api_version_option
@click.option("--batch", "batch_mode", type=click.Choice(["openai"]),
              help="openai: send the tasks through the OpenAI Batch API first (half the price, up to 24 h), into the "
                   "cache; what the batch does not answer is asked synchronously. A killed run resumes the same batch.")
@click.option("--batch-poll", default=30.0, show_default=True, type=_FiniteRange(min=0, min_open=True, max=3600),
              metavar="SECONDS", help="With --batch: seconds between two looks at a running batch.")
@click.option("--no-answer", "no_answer", multiple=True, default=("No Answer Present.",), show_default=True,
              metavar="TEXT", help="A reference that says there is no answer (repeat for several); such questions "
                                   "are scored as having no reference. An empty reference always counts.")
@click.option("--strict", is_flag=True,
              help="Refuse runs that rank questions missing from --data (default: leave them out, with a warning).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="table: the summary for people; csv and json: every measure and statistic, plus (json) the "
                   "judge, settings and accounting.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr (default: when stderr is a "
                                                             "terminal).")
@click.option("--columns", metavar="KEY=COL,...",
              help="Column mapping for CSV/TSV/Parquet inputs, e.g. question_id=qid,chunk_id=doc,rank=pos "
                   "(keys: question_id, chunk_id, rank, score, text, grade, question, reference).")
def score(data: str, run_specs: tuple[str, ...], qrels: str | None, corpus: str | None, judge_name: str,
          model: str | None, base_url: str | None, judge_id: str | None, prompt_ids: tuple[str, ...], ks: str,
          out: str | None, force: bool,
          cache_path: str | None, cache_mode: str, concurrency: int, samples: int, listwise: int, joint: bool,
          useful_rule: str,
          max_calls: int | None, max_tokens: int | None, max_cost: float | None, max_errors: str,
          price_in: float, price_out: float, timeout: float, reasoning_effort: str | None, api_version: str | None,
          batch_mode: str | None, batch_poll: float, no_answer: tuple[str, ...], strict: bool, fmt: str,
          progress: bool | None,
          columns: str | None) -> None:
    """Score runs with an LLM judge: context recall/precision and judge-labelled IR metrics.

    \b
    Example (no network, approximate judge):
      judge-eval score --data fixtures/clapnq/questions.jsonl --corpus fixtures/clapnq/corpus.jsonl \\
        --run bm25=fixtures/clapnq/runs/bm25.trec --judge offline -k 5,10

    Reads OPENAI_API_KEY and OPENAI_BASE_URL from the environment for the openai judge.
    Exit status: 0 done; 2 bad input or options; 3 the judge failed (refused, unreachable, more
    failed tasks than --max-errors, or a budget reached: results are still written); 130 Ctrl-C
    (a rerun resumes from the cache).
    """
    from judge_eval.evaluation import evaluate
    from judge_eval.report.folder import check_results_dir, write_results
    from judge_eval.report.summary import render_score_summary
    from judge_eval.run import Budget, ErrorTolerance, Pricing

    def run():
        k_list = parse_ks(ks)
        tolerance = ErrorTolerance.parse(max_errors)
        if force and not out:
            raise ConfigError("only applies to --out DIR", option="--force")
        if out:
            check_results_dir(out, force=force)
        results = evaluate(
            data,
            parse_runs(run_specs),
            qrels,
            corpus=corpus,
            columns=parse_columns(columns),
            judge=judge_name,
            model=model,
            base_url=base_url,
            judge_id=judge_id,
            prompts=list(prompt_ids) or None,
            ks=k_list,
            cache=cache_path,
            cache_mode=cache_mode,  # type: ignore[arg-type]
            concurrency=concurrency,
            samples=samples,
            budget=Budget(max_calls=max_calls, max_tokens=max_tokens, max_cost=max_cost),
            pricing=Pricing(price_in, price_out),
            joint=joint,
            useful_rule=useful_rule,  # type: ignore[arg-type]
            timeout=timeout,
            strict=strict,
            no_answer=no_answer,
            progress=sys.stderr.isatty() if progress is None else progress,
            reasoning_effort=reasoning_effort,
            api_version=api_version,
            batch=batch_mode,
            batch_poll=batch_poll,
            listwise=listwise,
        )
        if out:
            write_results(results, out, force=force)
        return results, tolerance

    results, tolerance = run()
    click.echo(render_score_summary(results, fmt))  # type: ignore[arg-type]
    if out:
        click.echo(f"\nresults written to {out.rstrip('/')}/", err=True)
    problem = results.judge_failure(tolerance)
    if problem:
        _fail(problem, ExitCode.JUDGE_FAILED)


@main.command("agreement")
@click.option("--results", "results_dir", required=True, type=click.Path(), metavar="DIR",
              help="A results folder written by judge-eval score --out.")
@click.option("--qrels", required=True, type=click.Path(dir_okay=False), help="Human labels: TREC qrels, JSONL "
                                                                              "or CSV/Parquet.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table for people; json for tools (every statistic with n, CI and the reason when undefined).")
@click.option("--out", type=click.Path(dir_okay=False), help="Write to FILE instead of standard output "
                                                             "(replaced atomically).")
@click.option("--seed", default=0, show_default=True, type=_COUNT, help="Seed of the bootstrap.")
@click.option("--columns", metavar="KEY=COL,...", help="Column mapping for a CSV/TSV/Parquet qrels file.")
def agreement_cmd(results_dir: str, qrels: str, fmt: str, out: str | None, seed: int, columns: str | None) -> None:
    """How far can the judge be trusted? Its agreement with human labels, for a results folder.

    \b
    Example:
      judge-eval agreement --results results/clapnq-offline --qrels fixtures/clapnq/qrels.txt

    Chunk level (kappa, weighted kappa, precision/recall of 'relevant', ROC AUC), question level
    (Pearson, Spearman, Kendall of each judged metric with its human twin) and system level
    (Kendall tau of the run rankings), each with n and a bootstrap CI; then each human metric
    estimated on every question from the judge corrected by the labelled ones (prediction-powered).
    `score --qrels` prints the same after its summary. Formulas: docs/agreement.md.
    """
    import json

    from judge_eval.agree import agree
    from judge_eval.atomic import check_file, write_text

    def run() -> str:
        if out:
            check_file(out)
        result = agree(results_dir, qrels, columns=parse_columns(columns), seed=seed)
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) if fmt == "json" else result.render()

    text = run()
    if out:
        write_text(out, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


@main.command("compare")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(), metavar="DIR...")
@click.option("--runs", metavar="NAME,...", help="The runs to compare, in this order (default: every run of the "
                                                 "folders).")
@click.option("--measures", metavar="NAME,...|all",
              help="Measures to compare (default: the summary table's: context recall/precision, judge nDCG, "
                   "recall, nDCG; 'all' for every shared measure).")
@click.option("--alpha", default=0.05, show_default=True, type=_FiniteRange(min=0, max=1, min_open=True, max_open=True),
              help="Significance level of the Holm-corrected paired randomization test.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json"]), default="table",
              show_default=True, help="table for people, markdown for pull requests, csv (one row per pair) and "
                                      "json for tools.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write to FILE instead of standard output "
                                                             "(replaced atomically).")
@click.option("--allow-different", is_flag=True,
              help="Compare results of different judges, prompt versions, test sets or settings anyway (the "
                   "output says what differs).")
@click.option("--seed", default=0, show_default=True, type=_COUNT, help="Seed of the bootstrap and the "
                                                                        "randomization test.")
@click.option("--n-perm", default=10000, show_default=True, type=_POSITIVE_INT, help="Random sign flips of the "
                                                                                     "randomization test.")
def compare_cmd(dirs: tuple[str, ...], runs: str | None, measures: str | None, alpha: float, fmt: str,
                out: str | None, allow_different: bool, seed: int, n_perm: int) -> None:
    """Are the differences between runs real? Paired tests over one or more results folders.

    \b
    Example:
      judge-eval compare results/clapnq-offline
      judge-eval compare results/monday results/tuesday --runs dense,tuesday/dense

    Per measure: each run's mean with a bootstrap CI; per pair of runs the mean paired difference
    with its CI and a paired randomization test, Holm-corrected over the pairs of each measure.
    Folders of different judges, prompts or test sets are refused unless --allow-different.
    """
    from judge_eval.atomic import check_file, write_text
    from judge_eval.compare import compare, render

    def run() -> str:
        if out:
            check_file(out)
        names = None if runs is None else [r.strip() for r in runs.split(",") if r.strip()]
        if names == []:
            raise ConfigError(f"{runs!r} names no run; write e.g. --runs bm25,dense", option="--runs")
        result = compare(list(dirs), runs=names, measures=measures, alpha=alpha, seed=seed, n_perm=n_perm,
                         allow_different=allow_different)
        return render(result, fmt)

    text = run()
    if out:
        write_text(out, text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text.rstrip("\n"))


# ----------------------------------------------------------------------------- labels


@main.group()
def labels() -> None:
    """Review the judge's verdicts as label proposals and turn them into qrels."""


def _selection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options that choose and order the items (shared by `labels propose` and `labels review`)."""
    for option in reversed([
        click.option("--results", required=True, type=click.Path(file_okay=False), metavar="DIR",
                     help="A results folder written by `judge-eval score --out DIR`."),
        click.option("--order", type=click.Choice(["uncertainty", "question", "run"]), default="uncertainty",
                     show_default=True, help="uncertainty: least confident verdicts first; question: question by "
                                             "question; run: run by run, in rank order."),
        click.option("--limit", type=_POSITIVE_INT, help="Only the first N items (after ordering)."),
        click.option("--only-unlabelled", is_flag=True, help="Leave out the (question, chunk) pairs that "
                                                             "--qrels grades."),
        click.option("--qrels", type=click.Path(dir_okay=False), help="The labels you already have (with "
                                                                      "--only-unlabelled)."),
    ]):
        fn = option(fn)
    return fn


@labels.command("propose")
@_selection_options
@click.option("--out", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The proposals file (replaced atomically). label-studio also writes FILE's stem + "
                   ".label_config.xml, argilla FILE's stem + .settings.json.")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "label-studio", "argilla"]), default="jsonl",
              show_default=True, help="csv/jsonl for a spreadsheet or script; label-studio: tasks with "
                                      "pre-annotations; "
                                      "argilla: records with suggestions.")
def labels_propose(results: str, order: str, limit: int | None, only_unlabelled: bool, qrels: str | None,
                   out: str, fmt: str) -> None:
    """One label proposal per judged (question, chunk), for review.

    \b
    Example:
      judge-eval labels propose --results results/clapnq-offline --out proposals.csv --format csv

    Each item: the question, the reference statements, the chunk, the judge's proposed grade, the
    statements it supports with evidence quotes and their offsets in the chunk, the reason, a
    confidence, and empty reviewer fields (grade, reviewer, reviewed_at, note).
    """
    from judge_eval.labels import propose

    proposals, paths = propose(results, out, fmt=fmt, order=order,  # type: ignore[arg-type]
                                              limit=limit, only_unlabelled=only_unlabelled, qrels=qrels)
    click.echo(f"{len(proposals.items)} proposals written to {', '.join(str(p) for p in paths)}", err=True)


@labels.command("review")
@_selection_options
@click.option("--out", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The review page, one self-contained HTML file (replaced atomically).")
def labels_review(results: str, order: str, limit: int | None, only_unlabelled: bool, qrels: str | None,
                  out: str) -> None:
    """Write a review page: one HTML file that opens from disk (no server, no network).

    \b
    Example:
      judge-eval labels review --results results/clapnq-offline --out review.html

    Keys: 0-3 grade, Enter accept the judge's grade, arrows move; work is kept in the browser;
    "Download reviewed file" gives the file for `judge-eval labels import`.
    """
    from judge_eval.labels import write_review_page

    proposals = write_review_page(results, out, order=order,  # type: ignore[arg-type]
                                                 limit=limit, only_unlabelled=only_unlabelled, qrels=qrels)
    click.echo(f"review page with {len(proposals.items)} items written to {out}", err=True)


@labels.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The TREC qrels to write (replaced atomically; nothing is written when FILE has an error).")
@click.option("--provenance", type=click.Path(dir_okay=False), metavar="FILE",
              help="Provenance CSV: proposed and final grade, decision, reviewer, time per label "
                   "(default: the --out file's stem + .provenance.csv).")
@click.option("--accept-unreviewed", is_flag=True,
              help="Also write the judge's proposed grade for items nobody reviewed (default: leave them out).")
def labels_import(file: str, out: str, provenance: str | None, accept_unreviewed: bool) -> None:
    """Reviewed proposals -> TREC qrels, with provenance and the judge's agreement with reviewers.

    \b
    Example:
      judge-eval labels import review.reviewed.jsonl --out qrels.reviewed.txt

    Reads the review page's file, our CSV/JSONL, a Label Studio JSON export or an Argilla records
    export; prints how many proposals were kept, changed up and changed down, and Cohen's kappa
    between the proposals and the final labels.
    """
    from judge_eval.labels import import_reviews

    report = import_reviews(file, out, provenance=provenance, accept_unreviewed=accept_unreviewed)
    click.echo(report.render())


# ----------------------------------------------------------------------------- audit


@main.group("audit", invoke_without_command=True)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="The audit config (TOML; `judge-eval audit init` writes a commented example).")
@click.option("--out", type=click.Path(), metavar="DIR",
              help="The audit folder (default: output.dir/<audit id> of the config). Checked before any judge call.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr (default: when stderr is a "
                                                             "terminal).")
@click.pass_context
def audit(ctx: click.Context, config_path: str | None, out: str | None, progress: bool | None) -> None:
    """Nightly audit: score every run, gate against floors and a baseline, record the history.

    \b
    Example:
      judge-eval audit init                 # writes audit.toml to edit
      judge-eval audit --config audit.toml

    The first lines say whether it passed and which run, metric and questions regressed.
    Exit status: 0 pass; 1 a metric regressed (below its floor, or a significant drop larger
    than allowed against the baseline); 2 bad config or input (nothing written or recorded);
    3 more judge errors than judge.max_errors, a budget reached, or judge drift on the canary.
    Every audit with status 0, 1 or 3 is recorded in the history. Details: docs/audit.md.
    """
    if ctx.invoked_subcommand is not None:
        if config_path or out:
            _fail(f"--config and --out belong to `judge-eval audit`, not to `audit {ctx.invoked_subcommand}`")
        return
    if not config_path:
        _fail("--config: give the audit config file (judge-eval audit init writes an example)")
    from judge_eval.audit import run_audit
    from judge_eval.audit.report import render_text

    result = run_audit(config_path, out=out,
                                      progress=sys.stderr.isatty() if progress is None else progress)
    click.echo(render_text(result.document))
    click.echo(f"\naudit {result.id} written to {str(result.folder).rstrip('/')}/ and recorded in the history",
               err=True)
    if result.exit_code:
        sys.exit(result.exit_code)


@audit.command("init")
@click.option("--out", "out_file", default="audit.toml", show_default=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="Where to write the example config.")
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
def audit_init(out_file: str, force: bool) -> None:
    """Write a commented example audit config to edit."""
    from judge_eval.atomic import write_text
    from judge_eval.audit import EXAMPLE

    if Path(out_file).exists() and not force:
        _fail(f"--out: {out_file} exists; choose another file or add --force to replace it")
    write_text(out_file, EXAMPLE)
    click.echo(f"example audit config written to {out_file}; edit it, then: judge-eval audit --config {out_file}",
               err=True)


@main.group("history")
def history() -> None:
    """The audit history: list audits, show one, follow a metric over time."""


def _history_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--history", "history_path", type=click.Path(dir_okay=False), metavar="PATH",
                     help="The history file (default: history.path of --config)."),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
                     help="An audit config: its history.path is read."),
    ]):
        fn = option(fn)
    return fn


def _open_history(history_path: str | None, config_path: str | None):
    from judge_eval.audit import History, load_config

    if history_path:
        return History(history_path)
    if config_path:
        return History(load_config(config_path).history)
    raise ConfigError("give the history file (--history PATH) or the audit config (--config FILE)", option="--history")


@history.command("list")
@_history_options
@click.option("--limit", type=_POSITIVE_INT, help="Only the newest N audits.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table for people, json for tools.")
def history_list(history_path: str | None, config_path: str | None, limit: int | None, fmt: str) -> None:
    """Every recorded audit, newest first: id, time, verdict, judge, dataset, baseline."""
    import json

    from judge_eval.audit.report import render_history

    rows = _open_history(history_path, config_path).audits(limit=limit)
    click.echo(json.dumps(rows, indent=2) if fmt == "json" else render_history(rows))


@history.command("show")
@click.argument("audit_id", metavar="ID")
@_history_options
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table",
              show_default=True, help="table: as the audit printed it; markdown: its report.md; json: its audit.json.")
def history_show(audit_id: str, history_path: str | None, config_path: str | None, fmt: str) -> None:
    """One audit (ID or a unique prefix of it): its verdict, checks, baseline and canary."""
    import json

    from judge_eval.audit.report import render_text
    from judge_eval.report.markdown import audit_markdown

    doc = _open_history(history_path, config_path).document(audit_id)
    click.echo(json.dumps(doc, indent=2, ensure_ascii=False) if fmt == "json"
               else audit_markdown(doc).rstrip("\n") if fmt == "markdown" else render_text(doc))


@history.command("trend")
@click.argument("metric")
@_history_options
@click.option("--run", "run_name", metavar="NAME", help="Only this run (default: every run).")
@click.option("--limit", type=_POSITIVE_INT, help="Only the newest N audits.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="table for people; csv and json for tools and plots.")
def history_trend(metric: str, history_path: str | None, config_path: str | None, run_name: str | None,
                  limit: int | None, fmt: str) -> None:
    """METRIC over the recorded audits, oldest first: value, 95% CI and n per run."""
    from judge_eval.audit.report import render_trend

    frame = _open_history(history_path, config_path).trend(metric, run=run_name, limit=limit)
    if fmt == "csv":
        click.echo(frame.to_csv(index=False).rstrip("\n"))
    elif fmt == "json":
        click.echo(frame.to_json(orient="records", indent=2))
    else:
        click.echo(render_trend(frame, metric))


# ----------------------------------------------------------------------------- report


@main.command("report")
@click.argument("folder", type=click.Path(), metavar="DIR")
@click.option("--baseline", type=click.Path(), metavar="DIR",
              help="An earlier results folder: the report shows the questions that moved most against it "
                   "(an audit folder uses its own baseline).")
@click.option("--metric", metavar="NAME",
              help="The measure whose per-question changes are shown (default: context_recall at the largest k, "
                   "else recall, ...).")
@click.option("--limit", default=15, show_default=True, type=_POSITIVE_INT, help="How many moved questions to show.")
@click.option("--out", type=click.Path(file_okay=False), metavar="DIR",
              help="Write report.md and report.html here instead of into DIR.")
@click.option("--plots/--no-plots", default=True, show_default=True,
              help="--no-plots: tables only (a page of kilobytes instead of about a megabyte).")
def report_cmd(folder: str, baseline: str | None, metric: str | None, limit: int, out: str | None,
               plots: bool) -> None:
    """Write report.md and report.html for a results folder or an audit folder.

    \b
    Example:
      judge-eval report results/clapnq-offline
      judge-eval report results/after --baseline results/before

    report.md is for CI logs and pull-request comments; report.html is one self-contained page
    (no network): each metric per run with its CI, the judge's agreement with humans, the
    questions that moved most with their chunks and the judge's evidence, and the reference
    statements no run's top k supports (corpus gaps) or only some runs miss (retriever gaps).
    """
    from judge_eval.report.render import write_report

    written = write_report(folder, baseline=baseline, out=out, metric=metric, limit=limit,
                                          with_plots=plots)
    click.echo(f"{'audit ' if written.audit else ''}report written to {written.markdown} and {written.html}")


# ----------------------------------------------------------------------------- batch


@main.group("batch")
def batch_group() -> None:
    """Judge a large audit offline: export the pending tasks as a batch file, import the answers."""


@batch_group.command("export")
@click.option("--data", required=True, type=click.Path(dir_okay=False),
              help="Questions with reference answers (as for score).")
@click.option("--run", "run_specs", multiple=True, metavar="NAME=PATH", help="A run file; repeat for several runs.")
@click.option("--qrels", type=click.Path(dir_okay=False), help="Human labels (as for score; they change no task).")
@click.option("--corpus", type=click.Path(dir_okay=False), help="Chunk texts (JSONL id,text) for TREC runs.")
@click.option("--columns", metavar="KEY=COL,...", help="Column mapping for CSV/TSV/Parquet inputs (as for score).")
@click.option("--judge", "judge_name", default="openai", show_default=True, metavar="NAME", callback=_judge_name,
              help="The judge whose requests are written: openai (any OpenAI-compatible endpoint).")
@click.option("--model", help="The model name the engine serves (it goes into every request). Env: JUDGE_EVAL_MODEL.")
@click.option("--base-url", help="The base URL score will be given (it names the judge in the cache keys).")
@click.option("--judge-id", metavar="NAME", help="As for score: name the judge in the cache keys.")
@click.option("--prompt", "prompt_ids", multiple=True, metavar="NAME@VERSION", callback=_prompt_ids,
              help="Prompt versions, as for score.")
@_reasoning_effort_option
@_api_version_option
@click.option("-k", "ks", default="5,10", show_default=True, help="Cutoffs, as for score: the top max(k) chunks.")
@click.option("--samples", default=1, show_default=True, type=_POSITIVE_INT, help="Samples per chunk, as for score.")
@click.option("--joint", is_flag=True, help="Also the joint context tasks, as for score --joint.")
@click.option("--no-answer", "no_answer", multiple=True, default=("No Answer Present.",), show_default=True,
              metavar="TEXT", help="As for score.")
@click.option("--strict", is_flag=True, help="As for score.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="The cache that records the exported tasks (and later takes the answers). Default: as for score.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The batch-request JSONL to write (replaced atomically).")
def batch_export(data: str, run_specs: tuple[str, ...], qrels: str | None, corpus: str | None, columns: str | None,
                 judge_name: str, model: str | None, base_url: str | None, judge_id: str | None,
                 prompt_ids: tuple[str, ...], reasoning_effort: str | None, api_version: str | None, ks: str,
                 samples: int, joint: bool, no_answer: tuple[str, ...], strict: bool, cache_path: str | None,
                 out: str) -> None:
    """Write the unique tasks the cache lacks as an OpenAI batch-request JSONL.

    \b
    Example (a vLLM cluster judges offline):
      judge-eval batch export --data q.jsonl --run dense=dense.trec --corpus c.jsonl \\
        --model Qwen/Qwen2.5-7B-Instruct --base-url http://gpu:8000/v1 --out requests.jsonl
      vllm run-batch -i requests.jsonl -o answers.jsonl --model Qwen/Qwen2.5-7B-Instruct
      judge-eval batch import answers.jsonl
      (repeat once: chunk tasks need the statements of the first round)
      judge-eval score ... --model Qwen/Qwen2.5-7B-Instruct --base-url http://gpu:8000/v1

    Give it the judge options score will get: they make the cache keys. Sends no request.
    """
    from judge_eval.atomic import check_file
    from judge_eval.evaluation import export_batch

    def run():
        check_file(out)
        return export_batch(data, parse_runs(run_specs), qrels, out=out, corpus=corpus, columns=parse_columns(columns),
                            judge=judge_name, model=model, base_url=base_url, ks=parse_ks(ks), cache=cache_path,
                            samples=samples, joint=joint, judge_id=judge_id, prompts=list(prompt_ids) or None,
                            reasoning_effort=reasoning_effort, api_version=api_version, strict=strict,
                            no_answer=no_answer)

    done = run()
    if done.written:
        click.echo(f"{done.written} requests written to {out} ({done.answered} tasks already answered in the cache)",
                   err=True)
    else:
        click.echo(f"nothing to export: the cache answers all {done.answered} tasks; {out} not written", err=True)
    if done.waiting:
        click.echo(f"{done.waiting} chunk tasks wait for their reference's statements: import the answers to this "
                   "file, then export again", err=True)


@batch_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="The cache `batch export` wrote to (default: $JUDGE_EVAL_CACHE or "
                   "~/.cache/judge-eval/responses.sqlite).")
def batch_import(file: str, cache_path: str | None) -> None:
    """Load a batch output file (OpenAI output or error file, vLLM run-batch output) into the cache.

    \b
    Example:
      judge-eval batch import answers.jsonl

    Every line is checked first (a bad one is named and nothing is stored). Failed requests and
    answers that do not validate stay pending: a following score asks them.
    """
    from judge_eval.judge.batch import import_results

    report = import_results(_open_cache(cache_path), file)
    left = sum(report.not_answered.values())
    causes = ", ".join(f"{cause} {n}" for cause, n in sorted(report.not_answered.items()))
    click.echo(f"{report.lines} results read: {report.stored} answers stored, {report.already} already cached"
               + (f", {left} not answered ({causes}): a following score asks them" if left else ""), err=True)


# ----------------------------------------------------------------------------- cache


@main.group()
def cache() -> None:
    """Inspect and share the judge response cache."""


def _open_cache(path: str | None, *, create: bool = False):
    """The cache file for a management command; only ``import`` may create one."""
    from judge_eval.cache import ResponseCache
    from judge_eval.evaluation import default_cache_path

    return ResponseCache(path or default_cache_path(), create=create)


_cache_option = click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
                             help="Cache file (default: $JUDGE_EVAL_CACHE or ~/.cache/judge-eval/responses.sqlite).")


@cache.command("stats")
@_cache_option
def cache_stats(cache_path: str | None) -> None:
    """Rows, judges, prompts and tokens saved."""
    import json

    stats = _open_cache(cache_path).stats()
    click.echo(json.dumps(stats, indent=2, default=str))


@cache.command("export")
@_cache_option
@click.argument("out", type=click.Path(dir_okay=False))
def cache_export(cache_path: str | None, out: str) -> None:
    """Write every cached response to OUT as JSONL (no secrets: keys are never stored)."""
    from judge_eval.atomic import check_file

    check_file(out, option="OUT")
    n = _open_cache(cache_path).export_jsonl(out)
    click.echo(f"exported {n} responses to {out}", err=True)


@cache.command("import")
@_cache_option
@click.argument("src", type=click.Path(dir_okay=False, exists=True))
def cache_import(cache_path: str | None, src: str) -> None:
    """Add the responses in SRC (JSONL from `cache export`); existing keys are kept."""
    n = _open_cache(cache_path, create=True).import_jsonl(src)
    click.echo(f"imported {n} responses from {src}", err=True)


@cache.command("clear")
@_cache_option
@click.option("--identity", help="Only responses of this judge identity (see `cache stats`).")
@click.confirmation_option(prompt="Delete the cached responses?")
def cache_clear(cache_path: str | None, identity: str | None) -> None:
    """Delete cached responses (all, or one judge's)."""
    n = _open_cache(cache_path).clear(identity=identity)
    click.echo(f"deleted {n} responses", err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
