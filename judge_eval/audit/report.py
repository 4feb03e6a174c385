"""An audit on the terminal: the headline (the first lines the command prints, also stored in
``audit.json`` for the reports), the checks table, and the history's list and trend.

``report.md`` and ``report.html`` are written by the renderers of ``judge-eval report``
(:func:`judge_eval.report.markdown.audit_markdown`, :func:`judge_eval.report.html.audit_html`),
from ``audit.json`` alone, so an audit folder written earlier renders the same way.
"""

from __future__ import annotations

from typing import Any

from judge_eval.report.tables import text_grid

__all__ = ["headline", "render_history", "render_text", "render_trend"]


def _v(x: float | None, digits: int = 3, sign: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _questions(check: dict[str, Any], n: int = 5) -> str:
    qs = check.get("regressed_questions") or []
    return ", ".join(f"{q['question_id']} {q['diff']:+.3f}" for q in qs[:n])


def regression_line(c: dict[str, Any]) -> str:
    """One line per regressed (run, metric): how much, why, and which questions dropped most."""
    parts = []
    if c["below_floor"]:
        parts.append(f"{_v(c['value'])} below floor {c['floor']:g}" if c["value"] is not None
                     else f"undefined on every question (floor {c['floor']:g})")
    if c["significant_drop"]:
        parts.append(f"{_v(c['baseline_value'])} -> {_v(c['value'])}, drop {-c['diff']:.3f} "
                     f"[{_v(c['diff_ci_low'], sign=True)}, {_v(c['diff_ci_high'], sign=True)}] > allowed "
                     f"{c['max_drop']:g}, p_holm {_p(c['p_holm'])}")
    line = f"REGRESSION run {c['run']}, metric {c['metric']}: " + "; ".join(parts)
    qs = _questions(c)
    if qs:
        line += f"; largest drops: {qs}"
    return line


def headline(doc: dict[str, Any]) -> list[str]:
    """The first lines of the output: the verdict, then one line per regression, the judge
    failure and the canary drift when there are any."""
    lines = []
    checks = doc["checks"]
    runs = list(dict.fromkeys(c["run"] for c in checks))
    metrics = list(dict.fromkeys(c["metric"] for c in checks))
    base = doc.get("baseline")
    against = (f"against {base['mode']} baseline {', '.join(base['ids'])}" if base and base["ids"]
               else "without baseline (floors only)")
    what = f"{len(runs)} run{'s' * (len(runs) != 1)} x {len(metrics)} metric{'s' * (len(metrics) != 1)} {against}"
    regressions = [c for c in checks if c["verdict"] == "regression"]
    if doc.get("judge_unavailable"):
        lines.append(f"JUDGE FAILED (exit 3): the judge refused the run or could not be reached "
                     f"({doc['judge_unavailable']}); nothing was scored")
    elif doc["verdict"] == "judge_failed":
        lines.append(f"JUDGE FAILED (exit 3): {what}; the numbers of this audit are not to be trusted")
    elif regressions:
        lines.append(f"REGRESSION (exit 1): {len(regressions)} of {len(checks)} checks regressed; {what}")
    else:
        lines.append(f"PASS (exit 0): {len(checks)} checks, {what}; no regression")
    lines += [regression_line(c) for c in regressions]
    if doc.get("judge_failure"):
        lines.append(f"JUDGE ERRORS: {doc['judge_failure']}")
    canary = doc.get("canary")
    if canary and canary["drift"]:
        lines.append(f"JUDGE DRIFT: {canary['reason']}")
    return lines


def _check_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["run", "metric", "value [95% CI]", "baseline", "diff [95% CI]", "p (Holm)", "floor", "max drop",
              "verdict"]
    body = []
    for c in doc["checks"]:
        value = _v(c["value"]) + (f" [{c['ci_low']:.2f},{c['ci_high']:.2f}]" if c["ci_low"] is not None else "")
        diff = _v(c["diff"], sign=True) + (f" [{c['diff_ci_low']:+.3f},{c['diff_ci_high']:+.3f}]"
                                            if c["diff_ci_low"] is not None else "")
        body.append([c["run"], c["metric"], value, _v(c["baseline_value"]), diff, _p(c["p_holm"]),
                     "-" if c["floor"] is None else f"{c['floor']:g}",
                     "-" if c["max_drop"] is None else f"{c['max_drop']:g}",
                     "REGRESSION" if c["verdict"] == "regression" else "ok"])
    return header, body


def render_text(doc: dict[str, Any]) -> str:
    """The terminal output: headline, notes, the checks table, the canary and the judge work."""
    lines = headline(doc)
    lines += [f"note: {n}" for n in doc.get("notes", [])]
    header, body = _check_rows(doc)
    if body:
        lines += ["", text_grid(header, body)]
    canary = doc.get("canary")
    if canary and not canary["drift"]:
        lines.append(canary["reason"])
    lines.append(_accounting(doc))
    return "\n".join(lines)


def _accounting(doc: dict[str, Any]) -> str:
    a = doc.get("accounting") or {}
    return (f"judge work: tasks {a.get('tasks', 0)}, calls {a.get('calls', 0)}, cache hits {a.get('cache_hits', 0)}, "
            f"errors {a.get('errors', 0)}, tokens {a.get('total_tokens', 0)}, cost ${a.get('cost_usd', 0):.4f}"
            + (f"; canary calls {doc['canary']['calls']}, cost ${doc['canary'].get('cost_usd', 0):.4f} (cache bypassed)"
               if doc.get("canary") else ""))


# ----------------------------------------------------------------------------- the history


def render_history(rows: list[dict[str, Any]]) -> str:
    """``judge-eval history list``: one line per audit, newest first."""
    if not rows:
        return "no audit recorded yet"
    header = ["id", "started", "verdict", "exit", "judge", "dataset", "baseline"]
    body = [[r["id"], r["started"], r["verdict"], str(r["exit_code"]), r["judge_identity"],
             r["dataset_fingerprint"], ", ".join(r["baseline"]) or "-"] for r in rows]
    return text_grid(header, body)


def render_trend(frame: Any, metric: str) -> str:
    """``judge-eval history trend``: one line per (audit, run), oldest first."""
    header = ["audit", "started", "run", metric, "95% CI", "n", "verdict"]
    body = [[r.audit_id, r.started, r.run, _v(None if r.value != r.value else r.value),
             "-" if r.ci_low != r.ci_low else f"[{r.ci_low:.3f}, {r.ci_high:.3f}]", str(r.n), r.verdict]
            for r in frame.itertuples(index=False)]
    return text_grid(header, body)
