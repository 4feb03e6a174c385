"""``run_audit()``: one nightly audit, start to end. Orchestration only:

    config.py (checked config) -> run commands -> evaluate() (judge + cache) -> canary.py
    (re-judged without cache) -> gate.py (floors, baseline, Holm) -> history.py (one
    transaction) -> the audit folder (results files, audit.json, report.md, report.html)

Everything that can be checked before work is paid for is checked first: the config, the
history file, the output folder, the canary file and a pinned baseline id.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from judge_eval.atomic import check_file, check_folder, write_folder
from judge_eval.audit.canary import CanaryResult, load_pairs, run_canary
from judge_eval.audit.config import AuditConfig, RunSpec, load_config
from judge_eval.audit.gate import Baseline, baseline_values, choose_baseline, run_gate, signature
from judge_eval.audit.history import History, HistoryError
from judge_eval.errors import ConfigError, ExitCode, InputError, JudgeUnavailableError
from judge_eval.report.folder import RESULT_FILES, json_ready, write_results
from judge_eval.results import Results
from judge_eval.version import package_version

__all__ = ["AUDIT_FILES", "Audit", "run_audit"]

SCHEMA = "judge-eval/audit@1"
#: the files of an audit folder
AUDIT_FILES = (*RESULT_FILES, "audit.json")


@dataclass
class Audit:
    """The outcome of :func:`run_audit`: ``document`` is ``audit.json``; ``exit_code`` the
    command's exit status (0 pass, 1 regression, 3 judge failed); ``folder`` the audit folder;
    ``results`` None when the judge could not be reached at all (nothing was scored)."""

    document: dict[str, Any]
    results: Results | None
    folder: Path

    @property
    def exit_code(self) -> int:
        return int(self.document["exit_code"])

    @property
    def id(self) -> str:
        return str(self.document["id"])


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def new_audit_id(t: datetime) -> str:
    return t.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


# ----------------------------------------------------------------------------- run commands


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def run_command(spec: RunSpec, cwd: Path) -> None:
    """Run ``spec.command`` with the shell in ``cwd``; it must write ``spec.file`` within
    ``spec.timeout`` seconds (else an InputError naming ``runs.NAME.command``; on timeout its
    whole process group is killed)."""
    key = f"runs.{spec.name}.command"
    before = _stamp(spec.file)
    env = {**os.environ, "JUDGE_EVAL_RUN_FILE": str(spec.file), "JUDGE_EVAL_RUN_NAME": spec.name}
    proc = subprocess.Popen(spec.command or "", shell=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise InputError(f"did not finish within {spec.timeout:g} s (runs.{spec.name}.timeout); it was killed",
                         field=key) from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    tail = " | ".join(output.decode("utf-8", "replace").strip().splitlines()[-3:])
    if proc.returncode != 0:
        raise InputError(f"exited with status {proc.returncode}" + (f": {tail}" if tail else ""), field=key)
    after = _stamp(spec.file)
    if after is None or after == before:
        raise InputError(f"finished but did not write {spec.file} (runs.{spec.name}.file)", field=key)


# ----------------------------------------------------------------------------- the audit


def _judge_kwargs(cfg: AuditConfig, progress: bool) -> dict[str, Any]:
    return dict(judge=cfg.judge, model=cfg.model, base_url=cfg.base_url, judge_id=cfg.judge_id,
                prompts=cfg.prompts, cache=cfg.cache_path, cache_mode=cfg.cache_mode, concurrency=cfg.concurrency,
                samples=cfg.samples, timeout=cfg.timeout, budget=cfg.budget, pricing=cfg.pricing, seed=cfg.seed,
                progress=progress)


def run_audit(config: str | os.PathLike[str] | AuditConfig, *, out: str | os.PathLike[str] | None = None,
              progress: bool = False, echo: Callable[[str], None] | None = None) -> Audit:
    """Run one audit (docs/audit.md) and return it; ``exit_code`` says pass (0), regression (1)
    or judge failure (3). Errors before the audit could be judged raise (ConfigError or
    InputError: exit 2, nothing recorded or written). ``out``: the audit folder (default
    ``output.dir/<audit id>``). ``echo``: where to say what is happening (e.g. a run command)."""
    from judge_eval.evaluation import evaluate

    cfg = config if isinstance(config, AuditConfig) else load_config(config)
    say = echo or (lambda _: None)
    started = _now()
    audit_id = new_audit_id(started)
    folder = Path(out) if out is not None else cfg.output_dir / audit_id
    # -- checks before any work
    history = History(cfg.history, create=True, timeout=cfg.history_timeout)
    if cfg.history.exists():
        history.check()
    else:
        check_file(cfg.history, option="history.path")
    check_folder(folder, AUDIT_FILES, option="--out" if out is not None else "output.dir")
    pinned = None
    if cfg.baseline_mode == "pinned" and cfg.baseline_id is not None:
        if not cfg.history.exists():
            raise ConfigError(f"no audit {cfg.baseline_id!r}: there is no history at {cfg.history} yet",
                              option="baseline.id")
        try:
            pinned = history.resolve(cfg.baseline_id)
        except HistoryError as exc:
            raise ConfigError(exc.message, option="baseline.id") from None
    pairs = None
    if cfg.canary is not None:
        from judge_eval.data.load import load_questions

        questions = load_questions(cfg.data, columns=cfg.columns)
        pairs = load_pairs(cfg.canary.pairs, questions)

    # -- the runs and the judge
    for spec in cfg.runs.values():
        if spec.command:
            say(f"run {spec.name}: {spec.command}")
            run_command(spec, cfg.path.parent)
    judge_kwargs = _judge_kwargs(cfg, progress)
    try:
        results = evaluate(cfg.data, {name: spec.file for name, spec in cfg.runs.items()}, cfg.qrels,
                           corpus=cfg.corpus, columns=cfg.columns, ks=cfg.ks, **judge_kwargs)
    except JudgeUnavailableError as exc:
        if exc.info is None:
            raise
        return _unreachable(cfg, exc, exc.info, audit_id, started, folder, history,
                            option="--out" if out is not None else "output.dir")
    canary: CanaryResult | None = None
    if cfg.canary is not None and pairs is not None:
        say(f"canary: re-judging {len(pairs)} human-labelled pairs without the cache")
        canary = run_canary(pairs, judge_kwargs, statistic=cfg.canary.statistic, floor=cfg.canary.floor,
                            previous=history.last_canary() if cfg.history.exists() else (None, []),
                            spent=results.accounting.as_dict())

    # -- the gate
    info = results.info
    current = signature(info["judge"]["identity"], info["prompts"], info["dataset"]["questions_fingerprint"],
                        info["settings"])
    audits = history.audits() if cfg.history.exists() else []
    rows, notes = choose_baseline(audits, current, cfg.baseline_mode, pinned=pinned, last=cfg.baseline_last)
    baseline = None
    if rows:
        ids = [r["id"] for r in rows]
        values = baseline_values(history.question_values(ids, cfg.check), cfg.baseline_mode)
        baseline = Baseline(mode=cfg.baseline_mode, ids=ids, started=[r["started"] for r in rows], values=values)
        missing_runs = sorted(set(cfg.runs) - set(values["run"]))
        if missing_runs:
            notes.append(f"no baseline for run{'s' * (len(missing_runs) != 1)} {', '.join(missing_runs)} "
                         "(new in this audit): only floors were checked for it")
    gate = run_gate(results.per_question, results.summary, baseline, check=cfg.check, floors=cfg.floors,
                    max_drops=cfg.max_drops, alpha=cfg.alpha, n_perm=cfg.n_perm, seed=cfg.seed,
                    n_boot=results.settings.n_boot)
    if not cfg.max_drops and baseline is not None:
        notes.append("no max_drop is configured (thresholds.default_max_drop or thresholds.max_drop): "
                     "only floors were checked")
    judge_failure = results.judge_failure(cfg.tolerance)
    if canary is not None and canary.partial:
        cut = f"a budget was reached during the canary: {canary.errors} of {len(canary.items)} pairs not judged"
        judge_failure = f"{judge_failure}; {cut}" if judge_failure else cut
    if judge_failure or (canary is not None and canary.drift):
        verdict, code = "judge_failed", ExitCode.JUDGE_FAILED
    elif gate.regressions:
        verdict, code = "regression", ExitCode.REGRESSION
    else:
        verdict, code = "pass", ExitCode.OK

    doc = _document(
        cfg, audit_id, started, info, verdict, code, notes,
        baseline=baseline.describe() if baseline else None, family_size=gate.family_size, checks=gate.checks,
        regressions=[{"run": c["run"], "metric": c["metric"]} for c in gate.regressions],
        accounting=info["accounting"], judge_failure=judge_failure,
        canary=canary.to_dict() if canary else None, trust=info.get("trust"),
        files={"results": [f for f in RESULT_FILES if not f.startswith("report.")], "report_md": "report.md",
               "report_html": "report.html"},
    )
    # -- record, then write the folder
    history.record(doc, results.per_question, results.summary, canary.items if canary else ())
    trend = _trend_rows(history, doc, cfg.check)
    base_folder = cfg.output_dir / baseline.ids[0] if baseline is not None and len(baseline.ids) == 1 else None

    def fill(tmp: Path) -> None:
        write_results(results, tmp)
        _write_audit_json(tmp, doc)
        write_reports(doc, tmp, baseline_folder=base_folder, history=trend)

    write_folder(folder, AUDIT_FILES, fill, option="--out" if out is not None else "output.dir")
    return Audit(document=doc, results=results, folder=folder)


def _document(cfg: AuditConfig, audit_id: str, started: datetime, info: dict[str, Any], verdict: str, code: int,
              notes: list[str], *, baseline: dict[str, Any] | None, family_size: int,
              **rest: Any) -> dict[str, Any]:
    """``audit.json``: what every audit records (id, times, verdict, config, version, judge,
    prompts, dataset, settings, baseline, gate), then ``rest`` in the order given; JSON-ready,
    with its headline."""
    from judge_eval.audit.report import headline

    doc = json_ready({
        "schema": SCHEMA, "id": audit_id, "started": _iso(started), "finished": _iso(_now()),
        "verdict": verdict, "exit_code": int(code), "headline": [], "notes": notes,
        "config": {"path": str(cfg.path), "hash": cfg.hash}, "package_version": package_version(),
        "judge": info["judge"], "prompts": info["prompts"], "dataset": info["dataset"], "settings": info["settings"],
        "baseline": baseline,
        "gate": {"alpha": cfg.alpha, "n_perm": cfg.n_perm, "seed": cfg.seed, "correction": "holm",
                 "family_size": family_size},
        **rest,
    })
    doc["headline"] = headline(doc)
    return doc


def _write_audit_json(folder: Path, doc: dict[str, Any]) -> None:
    (folder / "audit.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
                                       "utf-8")


def _unreachable(cfg: AuditConfig, exc: JudgeUnavailableError, info: dict[str, Any], audit_id: str,
                 started: datetime, folder: Path, history: History, *, option: str) -> Audit:
    """An audit whose judge refused the run or could not be reached (401, 404, nothing
    listening): recorded as ``judge_failed`` with no metric (so it is never a baseline, and
    ``history list`` shows the night it failed), its folder holding ``audit.json`` and a
    ``report.md`` that says why."""
    from judge_eval.audit.report import render_text

    doc = _document(
        cfg, audit_id, started, info, "judge_failed", ExitCode.JUDGE_FAILED,
        ["nothing was scored: the judge refused the run or could not be reached"],
        baseline=None, family_size=0, checks=[], regressions=[], accounting=exc.accounting,
        judge_failure=exc.message, judge_unavailable=exc.cause, canary=None, trust=None,
        files={"results": [], "report_md": "report.md", "report_html": None},
    )
    empty = pd.DataFrame(columns=["run", "question_id"])
    history.record(doc, empty, pd.DataFrame(columns=["run", "measure", "mean", "ci_low", "ci_high", "n"]))

    def fill(tmp: Path) -> None:
        _write_audit_json(tmp, doc)
        (tmp / "report.md").write_text(f"# Audit {audit_id}: judge failed\n\n```\n{render_text(doc)}\n```\n", "utf-8")

    write_folder(folder, AUDIT_FILES, fill, option=option)
    return Audit(document=doc, results=None, folder=folder)


def write_reports(doc: dict[str, Any], folder: Path, *, baseline_folder: Path | None = None,
                  history: list[dict[str, Any]] | None = None) -> None:
    """``report.md`` and ``report.html`` of the audit folder being built (which already holds the
    results files and ``audit.json``), with the renderers of ``judge-eval report``
    (:mod:`judge_eval.report.markdown`, :mod:`judge_eval.report.html`): the file the audit writes
    is the file ``judge-eval report`` would write. The trend comes from the history."""
    from judge_eval.report.html import audit_html
    from judge_eval.report.markdown import audit_markdown
    from judge_eval.report.render import read_source

    current = read_source(folder)
    base = None
    if baseline_folder is not None and (baseline_folder / "summary.json").is_file():
        try:
            base = read_source(baseline_folder)
        except InputError:  # a baseline folder moved or edited by hand: its chunks are optional
            base = None
    (folder / "report.md").write_text(audit_markdown(doc, current=current), "utf-8")
    (folder / "report.html").write_text(audit_html(doc, current=current, baseline=base, history=history), "utf-8")


def _trend_rows(history: History, doc: dict[str, Any], metrics: list[str]) -> list[dict[str, Any]]:
    """The checked metrics in every recorded audit comparable with ``doc`` (same judge, prompts,
    test set), oldest first: rows ``{audit, run, metric, value, ci_low, ci_high}`` (``audit`` is
    its id: two audits can start in the same second), as the HTML report's trend wants them."""
    mine = (doc["judge"]["identity"], doc["prompts"], doc["dataset"].get("questions_fingerprint"))
    keep = {a["id"] for a in history.audits()
            if (a["judge_identity"], a["prompts"], a["questions_fingerprint"]) == mine}
    rows: list[dict[str, Any]] = []
    for metric in metrics:
        frame = history.trend(metric)  # oldest first
        rows += [{"audit": r.audit_id, "run": r.run, "metric": metric, "value": json_ready(r.value),
                  "ci_low": json_ready(r.ci_low), "ci_high": json_ready(r.ci_high)}
                 for r in frame[frame["audit_id"].isin(keep)].itertuples(index=False)]
    return rows
