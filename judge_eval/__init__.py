"""judge-eval: score RAG retrieval with an LLM judge, and check the judge against human labels.

The public API::

    import judge_eval

    results = judge_eval.evaluate(
        "questions.jsonl",
        runs={"bm25": "runs/bm25.trec", "dense": "runs/dense.trec"},
        corpus="corpus.jsonl",
        judge="offline",            # or "openai" (+ model=, base_url=), or a Judge instance
        ks=(5, 10),
    )
    results.summary        # run x measure: mean, CI, n, n_missing (a pandas DataFrame)
    judge_eval.write_results(results, "results/")

Data models (:class:`Question`, :class:`Chunk`, :class:`Run`, :class:`Qrels`, :class:`Dataset`),
loaders (``load_dataset``, ``load_run``, ``load_qrels``, ``load_questions``, ``load_corpus``),
labelled metrics (``evaluate_runs``), judges (``OpenAIJudge``, ``OfflineJudge``) and the
response cache (``ResponseCache``) are importable from here. Heavy modules load on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from judge_eval.data.models import Chunk, Dataset, Qrels, Question, Run, content_id
from judge_eval.errors import ConfigError, ExitCode, InputError, JudgeCallError, JudgeEvalError

__version__ = "0.1.0"

_LAZY = {
    "evaluate": "judge_eval.evaluation",
    "evaluate_labelled": "judge_eval.labelled",
    "LabelledResults": "judge_eval.labelled",
    "write_results": "judge_eval.report.folder",
    "Results": "judge_eval.results",
    "MissingReason": "judge_eval.results",
    "Budget": "judge_eval.run",
    "Pricing": "judge_eval.run",
    "ErrorTolerance": "judge_eval.run",
    "load_dataset": "judge_eval.data.load",
    "load_run": "judge_eval.data.load",
    "load_qrels": "judge_eval.data.load",
    "load_questions": "judge_eval.data.load",
    "load_corpus": "judge_eval.data.load",
    "evaluate_runs": "judge_eval.metrics.evaluate_labelled",
    "aggregate": "judge_eval.metrics.stats",
    "OpenAIJudge": "judge_eval.judge.openai_judge",
    "OfflineJudge": "judge_eval.judge.offline",
    "ResponseCache": "judge_eval.cache",
}

__all__ = [
    "Chunk",
    "ConfigError",
    "Dataset",
    "ExitCode",
    "InputError",
    "JudgeCallError",
    "JudgeEvalError",
    "Qrels",
    "Question",
    "Run",
    "content_id",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'judge_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
