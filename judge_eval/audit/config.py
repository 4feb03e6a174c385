"""The audit config file (``audit.toml``): read with :mod:`tomllib`, checked key by key.

:func:`load_config` returns an :class:`AuditConfig` or raises :class:`ConfigError` whose
``option`` is the dotted key (``thresholds.floor."recall@10"``, ``runs.dense.timeout``), before
anything is run, paid for or written. Unknown keys are errors: a misspelt threshold must not
switch a check off silently. Relative paths are resolved against the config file's folder.
The keys and their defaults are documented in docs/audit.md; :data:`EXAMPLE` is the commented
file ``judge-eval audit init`` writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

from judge_eval.cache import MODES
from judge_eval.errors import ConfigError
from judge_eval.run import Budget, ErrorTolerance, Pricing

__all__ = ["EXAMPLE", "AuditConfig", "CanaryConfig", "RunSpec", "load_config", "metric_names"]

BASELINE_MODES = ("previous", "pinned", "median")
CANARY_STATISTICS = ("accuracy", "cohen_kappa")
#: families of measures an audit can check; ``human`` ones need labels.qrels
JUDGED_FAMILIES = ("context_recall", "context_precision", "judge_hit_rate", "judge_precision", "judge_recall",
                   "judge_mrr", "judge_ndcg")
HUMAN_FAMILIES = ("hit_rate", "precision", "recall", "mrr", "ndcg")
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class RunSpec:
    """One run: the file the audit reads, and optionally the shell command that writes it."""

    name: str
    file: Path
    command: str | None = None
    timeout: float = 3600.0


@dataclass(frozen=True)
class CanaryConfig:
    pairs: Path
    statistic: str = "accuracy"
    floor: float = 0.8


@dataclass(frozen=True)
class AuditConfig:
    """Everything an audit needs, checked (docs/audit.md names every key)."""

    path: Path
    data: Path
    runs: dict[str, RunSpec]
    check: list[str]
    ks: list[int] = field(default_factory=lambda: [5, 10])
    corpus: Path | None = None
    columns: dict[str, str] | None = None
    judge: str = "openai"
    model: str | None = None
    base_url: str | None = None
    judge_id: str | None = None
    prompts: list[str] | None = None
    concurrency: int = 8
    samples: int = 1
    timeout: float = 60.0
    max_errors: str = "5%"
    cache_path: Path | None = None
    cache_mode: str = "use"
    budget: Budget = field(default_factory=Budget)
    pricing: Pricing = field(default_factory=Pricing)
    floors: dict[str, float] = field(default_factory=dict)
    max_drops: dict[str, float] = field(default_factory=dict)
    baseline_mode: str = "previous"
    baseline_id: str | None = None
    baseline_last: int = 5
    alpha: float = 0.05
    n_perm: int = 10000
    seed: int = 0
    qrels: Path | None = None
    qrels_columns: dict[str, str] | None = None
    canary: CanaryConfig | None = None
    history: Path = Path("audit-history.sqlite")
    history_timeout: float = 30.0
    output_dir: Path = Path("audits")
    #: the parsed TOML, for the hash
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def hash(self) -> str:
        """``sha256:<hex>`` of the parsed config (canonical JSON): comments and layout do not change it."""
        text = json.dumps(self.raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    @property
    def tolerance(self) -> ErrorTolerance:
        return ErrorTolerance.parse(self.max_errors)

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("raw")
        return out


def metric_names(ks: list[int], *, human: bool) -> list[str]:
    """Every measure name an audit with these cutoffs produces (``judge_mrr``/``mrr`` at max(k))."""
    names = []
    for fam in JUDGED_FAMILIES + (HUMAN_FAMILIES if human else ()):
        if fam in ("judge_mrr", "mrr"):
            names.append(f"{fam}@{ks[-1]}")
        else:
            names.extend(f"{fam}@{k}" for k in ks)
    return names


# ----------------------------------------------------------------------------- checking values


class _Table:
    """A TOML table with its dotted key, handing out checked values and refusing unknown keys."""

    def __init__(self, data: Any, key: str, base: Path) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"must be a table, got {_kind(data)}", option=key)
        self.data = data
        self.key = key
        self.base = base
        self.used: set[str] = set()

    def sub(self, name: str) -> str:
        shown = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)
        return f"{self.key}.{shown}" if self.key else shown

    def get(self, name: str) -> Any:
        self.used.add(name)
        return self.data.get(name)

    def table(self, name: str, *, required: bool = False) -> _Table | None:
        value = self.get(name)
        if value is None:
            if required:
                raise ConfigError("missing (a table is required)", option=self.sub(name))
            return None
        return _Table(value, self.sub(name), self.base)

    def string(self, name: str, *, required: bool = False, default: str | None = None,
               choices: tuple[str, ...] | None = None) -> str | None:
        value = self.get(name)
        if value is None:
            if required:
                raise ConfigError("missing (required)", option=self.sub(name))
            return default
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"must be a non-empty string, got {_kind(value)}", option=self.sub(name))
        if choices is not None and value not in choices:
            raise ConfigError(f"must be one of {', '.join(choices)}, got {value!r}", option=self.sub(name))
        return value

    def path(self, name: str, *, required: bool = False, must_exist: bool = False,
             default: str | None = None) -> Path | None:
        text = self.string(name, required=required, default=default)
        if text is None:
            return None
        p = Path(text).expanduser()
        p = p if p.is_absolute() else self.base / p
        if must_exist and not p.is_file():
            raise ConfigError(f"file not found: {p}", option=self.sub(name))
        return p

    def integer(self, name: str, *, default: int | None, minimum: int) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"must be an integer >= {minimum}, got {value!r}", option=self.sub(name))
        return value

    def number(self, name: str, *, default: float | None, minimum: float | None = None,
               maximum: float | None = None, open_low: bool = False, open_high: bool = False) -> float | None:
        value = self.get(name)
        if value is None:
            return default
        return _number(value, self.sub(name), minimum, maximum, open_low, open_high)

    def mapping(self, name: str) -> dict[str, str] | None:
        value = self.get(name)
        if value is None:
            return None
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                  for k, v in value.items()):
            raise ConfigError("must be a table of column names, e.g. {question_id = \"qid\"}", option=self.sub(name))
        return dict(value)

    def done(self) -> None:
        unknown = [k for k in self.data if k not in self.used]
        if unknown:
            raise ConfigError(f"unknown key (known: {', '.join(sorted(self.used))})", option=self.sub(unknown[0]))


def _kind(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), repr(value))


def _number(value: Any, key: str, minimum: float | None, maximum: float | None, open_low: bool = False,
            open_high: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"must be a finite number, got {_kind(value)}", option=key)
    low_bad = minimum is not None and (value <= minimum if open_low else value < minimum)
    high_bad = maximum is not None and (value >= maximum if open_high else value > maximum)
    if low_bad or high_bad:
        lo = "" if minimum is None else f"{'>' if open_low else '>='} {minimum:g}"
        hi = "" if maximum is None else f"{'<' if open_high else '<='} {maximum:g}"
        raise ConfigError(f"must be {' and '.join(x for x in (lo, hi) if x)}, got {value!r}", option=key)
    return float(value)


# ----------------------------------------------------------------------------- the file


def load_config(path: str | os.PathLike[str]) -> AuditConfig:
    """Read and check ``path`` (see the module docstring)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}", option="--config")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p} is not UTF-8 text", option="--config") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p} is not valid TOML: {exc}", option="--config") from None
    base = p.resolve().parent
    top = _Table(raw, "", base)

    dataset = top.table("dataset", required=True)
    assert dataset is not None
    data = dataset.path("data", required=True, must_exist=True)
    corpus = dataset.path("corpus", must_exist=True)
    columns = dataset.mapping("columns")
    dataset.done()

    runs = _runs(top, base)

    judge_t = top.table("judge") or _Table({}, "judge", base)
    judge = judge_t.string("name", default="openai")
    model = judge_t.string("model")
    base_url = judge_t.string("base_url")
    judge_id = judge_t.string("judge_id")
    prompts = judge_t.get("prompts")
    if prompts is not None:
        if not isinstance(prompts, list) or not all(isinstance(x, str) for x in prompts):
            raise ConfigError("must be a list of NAME@VERSION strings", option="judge.prompts")
        from judge_eval.judge.prompts import select_prompts

        try:
            select_prompts(list(prompts))
        except ConfigError as exc:
            raise ConfigError(exc.message, option="judge.prompts") from None
    concurrency = judge_t.integer("concurrency", default=8, minimum=1)
    samples = judge_t.integer("samples", default=1, minimum=1)
    timeout = judge_t.number("timeout", default=60.0, minimum=0, maximum=86400, open_low=True)
    max_errors_raw = judge_t.get("max_errors")
    max_errors = "5%" if max_errors_raw is None else str(max_errors_raw)
    if isinstance(max_errors_raw, bool) or not isinstance(max_errors_raw, (str, int, float, type(None))):
        raise ConfigError(f"must be a share (\"5%\", 0.05) or a count, got {_kind(max_errors_raw)}",
                          option="judge.max_errors")
    try:
        ErrorTolerance.parse(max_errors)
    except ConfigError as exc:
        raise ConfigError(exc.message, option="judge.max_errors") from None
    judge_t.done()
    from judge_eval.judge.registry import judge_names

    if judge not in judge_names():
        raise ConfigError(f"unknown judge {judge!r}; known judges: {', '.join(judge_names())}", option="judge.name")

    cache_t = top.table("cache") or _Table({}, "cache", base)
    cache_path = cache_t.path("path")
    cache_mode = cache_t.string("mode", default="use", choices=MODES)
    cache_t.done()

    budget_t = top.table("budget") or _Table({}, "budget", base)
    max_calls = budget_t.integer("max_calls", default=None, minimum=0)
    max_tokens = budget_t.integer("max_tokens", default=None, minimum=0)
    max_cost = budget_t.number("max_cost", default=None, minimum=0)
    price_in = budget_t.number("price_in", default=0.0, minimum=0)
    price_out = budget_t.number("price_out", default=0.0, minimum=0)
    budget_t.done()

    labels_t = top.table("labels") or _Table({}, "labels", base)
    qrels = labels_t.path("qrels", must_exist=True)
    qrels_columns = labels_t.mapping("columns")
    labels_t.done()

    metrics_t = top.table("metrics", required=True)
    assert metrics_t is not None
    ks_raw = metrics_t.get("ks")
    ks = [5, 10] if ks_raw is None else ks_raw
    if (not isinstance(ks, list) or not ks
            or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in ks)):
        raise ConfigError(f"must be a non-empty list of integers >= 1, got {ks_raw!r}", option="metrics.ks")
    ks = sorted(set(ks))
    check_raw = metrics_t.get("check")
    if check_raw is None:
        raise ConfigError("missing (required): the metrics the gate checks, e.g. [\"context_recall@10\"]",
                          option="metrics.check")
    if not isinstance(check_raw, list) or not check_raw or not all(isinstance(m, str) for m in check_raw):
        raise ConfigError("must be a non-empty list of metric names", option="metrics.check")
    known = metric_names(ks, human=True)
    available = metric_names(ks, human=qrels is not None)
    for m in check_raw:
        if m not in available:
            hint = (" (a human metric: it needs labels.qrels)" if m in known else
                    f"; with ks {ks} the metrics are {', '.join(available)}")
            raise ConfigError(f"unknown metric {m!r}{hint}", option="metrics.check")
    check = list(dict.fromkeys(check_raw))
    metrics_t.done()

    floors, max_drops = _thresholds(top, check, base)

    base_t = top.table("baseline") or _Table({}, "baseline", base)
    baseline_mode = base_t.string("mode", default="previous", choices=BASELINE_MODES)
    baseline_id = base_t.string("id")
    baseline_last = base_t.integer("last", default=5, minimum=1)
    if baseline_mode == "pinned" and baseline_id is None:
        raise ConfigError("missing: baseline.mode = \"pinned\" needs the audit id to compare with",
                          option="baseline.id")
    if baseline_mode != "pinned" and baseline_id is not None:
        raise ConfigError(f"only applies with mode = \"pinned\" (mode is {baseline_mode!r})", option="baseline.id")
    if baseline_mode != "median" and base_t.data.get("last") is not None:
        raise ConfigError(f"only applies with mode = \"median\" (mode is {baseline_mode!r})", option="baseline.last")
    base_t.done()

    gate_t = top.table("gate") or _Table({}, "gate", base)
    alpha = gate_t.number("alpha", default=0.05, minimum=0, maximum=1, open_low=True, open_high=True)
    n_perm = gate_t.integer("n_perm", default=10000, minimum=1)
    seed = gate_t.integer("seed", default=0, minimum=0)
    gate_t.done()

    canary = None
    canary_t = top.table("canary")
    if canary_t is not None:
        pairs = canary_t.path("pairs", required=True, must_exist=True)
        statistic = canary_t.string("statistic", default="accuracy", choices=CANARY_STATISTICS)
        floor = canary_t.number("floor", default=0.8, minimum=-1, maximum=1)
        canary_t.done()
        assert pairs is not None and statistic is not None and floor is not None
        canary = CanaryConfig(pairs=pairs, statistic=statistic, floor=floor)

    history_t = top.table("history") or _Table({}, "history", base)
    history = history_t.path("path", default="audit-history.sqlite")
    history_timeout = history_t.number("timeout", default=30.0, minimum=0, maximum=3600, open_low=True)
    history_t.done()
    output_t = top.table("output") or _Table({}, "output", base)
    output_dir = output_t.path("dir", default="audits")
    output_t.done()
    top.done()

    assert data is not None and history is not None and output_dir is not None
    return AuditConfig(
        path=p.resolve(), data=data, runs=runs, check=check, ks=ks, corpus=corpus, columns=columns,
        judge=judge or "openai", model=model, base_url=base_url, judge_id=judge_id,
        prompts=list(prompts) if prompts else None, concurrency=concurrency or 8, samples=samples or 1,
        timeout=timeout or 60.0, max_errors=max_errors, cache_path=cache_path, cache_mode=cache_mode or "use",
        budget=Budget(max_calls=max_calls, max_tokens=max_tokens, max_cost=max_cost),
        pricing=Pricing(price_in or 0.0, price_out or 0.0),
        floors=floors, max_drops=max_drops, baseline_mode=baseline_mode or "previous", baseline_id=baseline_id,
        baseline_last=baseline_last or 5, alpha=alpha or 0.05, n_perm=n_perm or 10000, seed=seed or 0,
        qrels=qrels, qrels_columns=qrels_columns, canary=canary, history=history,
        history_timeout=history_timeout or 30.0, output_dir=output_dir,
        raw=raw,
    )


def _runs(top: _Table, base: Path) -> dict[str, RunSpec]:
    runs_t = top.table("runs", required=True)
    assert runs_t is not None
    if not runs_t.data:
        raise ConfigError("no run: add a [runs.NAME] table with file = \"...\"", option="runs")
    runs: dict[str, RunSpec] = {}
    for name in runs_t.data:
        key = runs_t.sub(name)
        if not _RUN_NAME.match(name):
            raise ConfigError("a run name is letters, digits, '.', '_' or '-'", option=key)
        t = runs_t.table(name)
        assert t is not None
        command = t.string("command")
        file = t.path("file", required=True, must_exist=command is None)
        timeout = t.number("timeout", default=3600.0, minimum=0, open_low=True)
        if command is None and t.data.get("timeout") is not None:
            raise ConfigError("only applies to a run with a command", option=t.sub("timeout"))
        t.done()
        assert file is not None and timeout is not None
        runs[name] = RunSpec(name=name, file=file, command=command, timeout=timeout)
    return runs


def _thresholds(top: _Table, check: list[str], base: Path) -> tuple[dict[str, float], dict[str, float]]:
    t = top.table("thresholds") or _Table({}, "thresholds", base)
    default_drop = t.number("default_max_drop", default=None, minimum=0)
    floors: dict[str, float] = {}
    drops: dict[str, float] = {}
    for name, out, minimum in (("floor", floors, None), ("max_drop", drops, 0.0)):
        sub = t.table(name)
        if sub is None:
            continue
        for metric, value in sub.data.items():
            key = sub.sub(metric)
            if metric not in check:
                raise ConfigError(f"{metric!r} is not in metrics.check ({', '.join(check)})", option=key)
            out[metric] = _number(value, key, minimum, None)
    t.done()
    if default_drop is not None:
        for metric in check:
            drops.setdefault(metric, default_drop)
    return floors, drops


EXAMPLE = '''\
# judge-eval audit config (docs/audit.md explains every key).
# Relative paths are relative to this file's folder.
# Run it nightly:  judge-eval audit --config audit.toml
# Exit codes: 0 pass, 1 regression, 2 bad config or input, 3 judge errors / budget / canary drift.

[dataset]
data = "questions.jsonl"          # questions with reference answers
corpus = "corpus.jsonl"           # chunk texts for TREC runs (optional)

# One table per run: a file, or a shell command that writes it (run in this folder; it gets
# JUDGE_EVAL_RUN_FILE = the file's absolute path), killed after `timeout` seconds.
[runs.dense]
file = "runs/dense.trec"

[runs.bm25]
file = "runs/bm25.trec"
# command = "python retrieve.py --retriever bm25 --out $JUDGE_EVAL_RUN_FILE"
# timeout = 1800

[judge]
name = "openai"                   # openai | offline | a plugin
model = "gpt-4o-mini"
# base_url = "http://127.0.0.1:8080/v1"
# judge_id = "my-judge"
concurrency = 8
max_errors = "5%"                 # failed judge tasks tolerated before exit 3

[cache]
# path = "judge-cache.sqlite"     # default: $JUDGE_EVAL_CACHE or ~/.cache/judge-eval/responses.sqlite
mode = "use"

[budget]
max_cost = 5.0                    # USD; reaching a cap exits 3
price_in = 0.15                   # USD per million prompt tokens
price_out = 0.60                  # USD per million completion tokens

[metrics]
ks = [5, 10]
check = ["context_recall@10", "context_precision@10", "judge_ndcg@10"]

[thresholds]
default_max_drop = 0.02           # a drop larger than this, and significant, is a regression

[thresholds.floor]                # below the floor fails, whatever the baseline
"context_recall@10" = 0.40

# [thresholds.max_drop]           # per-metric overrides of default_max_drop
# "context_precision@10" = 0.03

[baseline]
mode = "previous"                 # previous | pinned (with id = "...") | median (with last = 5)

[gate]
alpha = 0.05                      # significance level after Holm's correction

# [labels]                        # a human-labelled subset: agreement and corrected estimates
# qrels = "qrels.txt"

# [canary]                        # human-labelled pairs re-judged nightly without the cache
# pairs = "canary.jsonl"          # {"question_id", "chunk_id", "grade", "text", "question", "reference"}
# statistic = "accuracy"          # accuracy | cohen_kappa
# floor = 0.8                     # below it: judge drift, exit 3

[history]
path = "audit-history.sqlite"

[output]
dir = "audits"                    # each audit writes audits/<audit id>/
'''
