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

Judges: the ``Judge`` protocol and its answers (``Statements``, ``ChunkVerdict``, ``Support``,
``JudgeResponse``, ``Usage``); ``JudgeCore`` (cache, parsing, checks, repair around a
``Transport``: ``CompletionRequest`` in, ``Completion`` out, ``Decoding``); ``register_judge``,
``judge_names`` and ``JudgeSettings`` for judge plugins (docs/plugins.md); ``Prompt``,
``load_prompt`` and ``select_prompts`` for prompt versions.
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
    # judges: the protocol, the answers, the core and its transports, plugins, prompts
    "Judge": "judge_eval.judge.protocol",
    "JudgeResponse": "judge_eval.judge.protocol",
    "Statements": "judge_eval.judge.protocol",
    "ChunkVerdict": "judge_eval.judge.protocol",
    "Support": "judge_eval.judge.protocol",
    "Usage": "judge_eval.usage",
    "JudgeCore": "judge_eval.judge.core",
    "Transport": "judge_eval.judge.core",
    "CompletionRequest": "judge_eval.judge.core",
    "Completion": "judge_eval.judge.core",
    "Decoding": "judge_eval.judge.core",
    "register_judge": "judge_eval.judge.registry",
    "judge_names": "judge_eval.judge.registry",
    "JudgeSettings": "judge_eval.judge.registry",
    "Prompt": "judge_eval.judge.prompts",
    "load_prompt": "judge_eval.judge.prompts",
    "select_prompts": "judge_eval.judge.prompts",
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
