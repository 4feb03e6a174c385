"""The ``judge-eval`` command line. Thin: it parses arguments and calls the Python API.

Exit codes: 0 success; 1 an unexpected failure; 2 bad input or configuration (nothing written).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, NoReturn, Sequence, TypeVar

import click

from judge_eval.errors import InputError, JudgeEvalError

T = TypeVar("T")


# ----------------------------------------------------------------------------- helpers


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; bad input or configuration -> one clear message on stderr and exit 2."""
    try:
        return fn()
    except JudgeEvalError as exc:  # InputError, ConfigError, ...
        _fail(str(exc))


def parse_ks(text: str) -> list[int]:
    """``"1,3,5"`` -> ``[1, 3, 5]``; every k must be an integer >= 1."""
    ks: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise InputError(f"-k: {part!r} is not an integer >= 1", field="k")
        ks.append(int(part))
    if not ks:
        raise InputError("-k: give at least one cutoff, e.g. -k 5,10", field="k")
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


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file, so a failure leaves no partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------- commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="judge-eval")
def main() -> None:
    """Score RAG retrieval with an LLM judge when nobody labelled the chunks, and with human
    labels (qrels) when somebody did."""


@main.command()
@click.option("--qrels", required=True, type=click.Path(dir_okay=False), help="Human labels: TREC qrels, JSONL or CSV/Parquet.")
@click.option("--run", "run_specs", multiple=True, required=True, metavar="NAME=PATH",
              help="A run (TREC or native JSONL); repeat for several runs.")
@click.option("-k", "ks", default="1,3,5,10", show_default=True, help="Cutoffs, comma-separated.")
@click.option("--measures", default="hit_rate,precision,recall,mrr,ndcg", show_default=True,
              help="Comma-separated: hit_rate, precision, recall, mrr, ndcg, ndcg_exp, ndcg_jarvelin, "
                   "map, r_precision, judged; NAME@K for one cutoff.")
@click.option("--threshold", default=1, show_default=True, type=int, help="Relevant iff grade >= threshold.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--ci", is_flag=True, help="Show 95% bootstrap confidence intervals in the table.")
@click.option("--per-question", is_flag=True, help="Print one row per (run, question) instead of the summary.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write to FILE instead of standard output.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap.")
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
    there (trec_eval -c). Undefined values (e.g. recall with no relevant label) are left out
    of the mean and counted as n_missing.
    """
    from judge_eval.data.load import load_qrels, load_run
    from judge_eval.metrics.evaluate_labelled import evaluate_runs
    from judge_eval.metrics.stats import aggregate
    from judge_eval.report.tables import render, render_per_question

    def run() -> str:
        k_list = parse_ks(ks)
        run_paths = parse_runs(run_specs)
        mapping = parse_columns(columns)
        labels = load_qrels(qrels, columns=mapping)
        runs = {name: load_run(path, name, columns=mapping) for name, path in run_paths.items()}
        frame = evaluate_runs(runs, labels, measures=measures, ks=k_list, threshold=threshold)
        if per_question:
            return render_per_question(frame, fmt)  # type: ignore[arg-type]
        summary = aggregate(frame, by=["run"], seed=seed)
        return render(summary, fmt, with_ci=ci)  # type: ignore[arg-type]

    text = _guard(run)
    if out:
        _write_atomic(Path(out), text if text.endswith("\n") else text + "\n")
    else:
        click.echo(text)


@main.command()
@click.option("--data", required=True, type=click.Path(dir_okay=False),
              help="Questions with reference answers: native JSONL (may carry 'contexts'), RAGAS records, CSV/Parquet.")
@click.option("--run", "run_specs", multiple=True, metavar="NAME=PATH", help="A run file; repeat for several runs.")
@click.option("--qrels", type=click.Path(dir_okay=False), help="Human labels (optional): adds labelled metrics.")
@click.option("--corpus", type=click.Path(dir_okay=False), help="Chunk texts (JSONL id,text) for TREC runs.")
@click.option("--judge", "judge_name", type=click.Choice(["openai", "offline"]), default=None,
              help="openai: any OpenAI-compatible endpoint; offline: deterministic lexical approximation, no network.")
@click.option("--model", help="Judge model name (openai judge). Env: JUDGE_EVAL_MODEL.")
@click.option("--base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1. Env: OPENAI_BASE_URL.")
@click.option("-k", "ks", default="5,10", show_default=True, help="Cutoffs, comma-separated; the top max(k) chunks are judged.")
@click.option("--out", type=click.Path(file_okay=False), help="Write the results folder here.")
@click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
              help="Response cache (SQLite). Default: $JUDGE_EVAL_CACHE or ~/.cache/judge-eval/responses.sqlite.")
@click.option("--cache-mode", type=click.Choice(["use", "refresh", "replay", "off"]), default="use", show_default=True)
@click.option("--concurrency", default=8, show_default=True, help="Judge calls in flight at once.")
@click.option("--samples", default=1, show_default=True, help="Ask the judge N times per chunk; majority vote.")
@click.option("--joint", is_flag=True, help="Also compute joint context recall (top-k judged as one context).")
@click.option("--useful", "useful_rule", type=click.Choice(["support", "grade"]), default="support", show_default=True,
              help="A chunk is useful for context precision when it supports a statement, or when its grade >= 2.")
@click.option("--max-calls", type=int, help="Stop scheduling new judge calls after this many.")
@click.option("--max-tokens", type=int, help="Stop scheduling new judge calls after this many tokens.")
@click.option("--max-cost", type=float, help="Stop scheduling new judge calls after this cost (USD).")
@click.option("--price-in", default=0.0, show_default=True, help="USD per million prompt tokens.")
@click.option("--price-out", default=0.0, show_default=True, help="USD per million completion tokens.")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds per judge request.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr (default: when stderr is a terminal).")
@click.option("--columns", metavar="KEY=COL,...",
              help="Column mapping for CSV/TSV/Parquet inputs, e.g. question_id=qid,chunk_id=doc,rank=pos "
                   "(keys: question_id, chunk_id, rank, score, text, grade, question, reference).")
def score(data: str, run_specs: tuple[str, ...], qrels: str | None, corpus: str | None, judge_name: str | None,
          model: str | None, base_url: str | None, ks: str, out: str | None, cache_path: str | None,
          cache_mode: str, concurrency: int, samples: int, joint: bool, useful_rule: str,
          max_calls: int | None, max_tokens: int | None, max_cost: float | None, price_in: float,
          price_out: float, timeout: float, fmt: str, progress: bool | None, columns: str | None) -> None:
    """Score runs with an LLM judge: context recall/precision and judge-labelled IR metrics.

    \b
    Example (no network, approximate judge):
      judge-eval score --data fixtures/clapnq/questions.jsonl --corpus fixtures/clapnq/corpus.jsonl \\
        --run bm25=fixtures/clapnq/runs/bm25.trec --judge offline -k 5,10

    Reads OPENAI_API_KEY and OPENAI_BASE_URL from the environment for the openai judge.
    """
    from judge_eval.evaluation import evaluate
    from judge_eval.plan import Budget, Pricing
    from judge_eval.report.summary import render_score_summary

    def run():
        return evaluate(
            data,
            parse_runs(run_specs),
            qrels,
            corpus=corpus,
            columns=parse_columns(columns),
            judge=judge_name,  # type: ignore[arg-type]
            model=model,
            base_url=base_url,
            ks=parse_ks(ks),
            cache=cache_path,
            cache_mode=cache_mode,  # type: ignore[arg-type]
            concurrency=concurrency,
            samples=samples,
            budget=Budget(max_calls=max_calls, max_tokens=max_tokens, max_cost=max_cost),
            pricing=Pricing(price_in, price_out),
            joint=joint,
            useful_rule=useful_rule,  # type: ignore[arg-type]
            timeout=timeout,
            progress=sys.stderr.isatty() if progress is None else progress,
        )

    results = _guard(run)
    if out:
        results.write(out)
    click.echo(render_score_summary(results, fmt))  # type: ignore[arg-type]
    if out:
        click.echo(f"\nresults written to {out}/", err=True)


# ----------------------------------------------------------------------------- cache


@main.group()
def cache() -> None:
    """Inspect and share the judge response cache."""


def _open_cache(path: str | None):
    from judge_eval.cache import ResponseCache
    from judge_eval.evaluation import default_cache_path

    return ResponseCache(path or default_cache_path())


_cache_option = click.option("--cache", "cache_path", type=click.Path(dir_okay=False),
                             help="Cache file (default: $JUDGE_EVAL_CACHE or ~/.cache/judge-eval/responses.sqlite).")


@cache.command("stats")
@_cache_option
def cache_stats(cache_path: str | None) -> None:
    """Rows, judges, prompts and tokens saved."""
    import json

    stats = _guard(lambda: _open_cache(cache_path).stats())
    click.echo(json.dumps(stats, indent=2, default=str))


@cache.command("export")
@_cache_option
@click.argument("out", type=click.Path(dir_okay=False))
def cache_export(cache_path: str | None, out: str) -> None:
    """Write every cached response to OUT as JSONL (no secrets: keys are never stored)."""
    n = _guard(lambda: _open_cache(cache_path).export_jsonl(out))
    click.echo(f"exported {n} responses to {out}", err=True)


@cache.command("import")
@_cache_option
@click.argument("src", type=click.Path(dir_okay=False, exists=True))
def cache_import(cache_path: str | None, src: str) -> None:
    """Add the responses in SRC (JSONL from `cache export`); existing keys are kept."""
    n = _guard(lambda: _open_cache(cache_path).import_jsonl(src))
    click.echo(f"imported {n} responses from {src}", err=True)


@cache.command("clear")
@_cache_option
@click.option("--identity", help="Only responses of this judge identity (see `cache stats`).")
@click.confirmation_option(prompt="Delete the cached responses?")
def cache_clear(cache_path: str | None, identity: str | None) -> None:
    """Delete cached responses (all, or one judge's)."""
    n = _guard(lambda: _open_cache(cache_path).clear(identity=identity))
    click.echo(f"deleted {n} responses", err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
