"""The report's pictures: Vega-Lite specs (plain dicts) built from the numbers of
:mod:`judge_eval.report.analysis`, and the vendored Vega and Vega-Lite scripts that draw them in
the page (``vendor/``, shipped in the wheel, inlined so the page needs no network).

Why Vega-Lite and not matplotlib: see docs/reports.md. Every spec carries its data inline
(``data.values``), so a test can compare what a plot shows with the results folder; the page
also shows every plotted number in a table.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

__all__ = ["PALETTE", "VENDORED", "confusion_spec", "differences_spec", "gaps_spec", "metrics_spec",
           "movers_spec", "scatter_spec", "trend_spec", "vega_scripts"]

#: vendored file -> sha256 (docs in vendor/README.md; tests check them)
VENDORED = {
    "vega.min.js": "8f6a3587cf8d4f42c7e08120e3eb05d067e746d554e39d2dcf52acc0bd5ba28f",
    "vega-lite.min.js": "83e215e84e308ee8688fa6503ba0f1cf8a3c05c0d61df2841a0b92bf86809e00",
}

#: one colour per run, in run order (Tableau 10, colour-blind friendlier than Vega's default)
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]

WIDTH = 520
WIDE = 700  # the metrics plot: labels (up to 220 px) + 700 + its value labels fit 1200 px


def vega_scripts() -> str | None:
    """The two vendored scripts, ready to inline (their source-map comment dropped), or None
    when they are missing or altered (the page then shows tables only)."""
    parts = []
    for name, digest in VENDORED.items():
        try:
            data = resources.files("judge_eval.report").joinpath("vendor").joinpath(name).read_bytes()
        except (FileNotFoundError, OSError):
            return None
        if hashlib.sha256(data).hexdigest() != digest:
            return None
        text = data.decode("utf-8")
        lines = [ln for ln in text.splitlines() if not ln.startswith("//# sourceMappingURL=")]
        parts.append("\n".join(lines))
    return "\n".join(parts)


def _runs_color(runs: list[str]) -> dict[str, Any]:
    return {"field": "run", "type": "nominal", "title": "run",
            "scale": {"domain": runs, "range": [PALETTE[i % len(PALETTE)] for i in range(len(runs))]},
            "legend": {"orient": "top", "title": None}}


def _domain(values: list[float | None]) -> list[float]:
    finite = [v for v in values if v is not None]
    return [min([0.0, *finite]), max([1.0, *finite])]


def metrics_spec(summary: list[dict[str, Any]], runs: list[str], measures: list[str]) -> dict[str, Any]:
    """Each measure@k a row; in it one bar per run: the mean (dot and label) and its 95% CI
    (line). Rows grow down the page, never across, however many cutoffs there are."""
    rows = []
    for r in summary:
        mean = r.get("mean")
        lo, hi = r.get("ci_low"), r.get("ci_high")
        rows.append({"measure": r["measure"], "run": r["run"], "mean": mean, "ci_low": lo, "ci_high": hi,
                     "n": r.get("n"), "label": "-" if mean is None else f"{mean:.3f}",
                     "label_x": hi if hi is not None else mean if mean is not None else 0})
    x_scale = {"domain": _domain([v for r in rows for v in (r["ci_low"], r["ci_high"], r["mean"])])}
    step = 13  # per run: with yOffset the step is the offset band's
    return {
        "data": {"values": rows},
        "width": WIDE,
        "height": {"step": step},
        "encoding": {
            "y": {"field": "measure", "type": "nominal", "sort": measures, "title": None,
                  "axis": {"labelLimit": 220, "labelFontSize": 12, "grid": True, "gridColor": "#eee"}},
            "yOffset": {"field": "run", "type": "nominal", "sort": runs},
            "color": _runs_color(runs),
        },
        "layer": [
            {"mark": {"type": "rule", "strokeWidth": 2.5},
             "encoding": {"x": {"field": "ci_low", "type": "quantitative", "scale": x_scale,
                                "title": "mean over questions, line = 95% bootstrap CI"},
                          "x2": {"field": "ci_high"}}},
            {"mark": {"type": "point", "filled": True, "size": 45, "opacity": 1},
             "encoding": {"x": {"field": "mean", "type": "quantitative", "scale": x_scale},
                          "tooltip": [{"field": "measure"}, {"field": "run"},
                                      {"field": "mean", "format": ".3f"}, {"field": "ci_low", "format": ".3f"},
                                      {"field": "ci_high", "format": ".3f"}, {"field": "n"}]}},
            {"mark": {"type": "text", "align": "left", "dx": 5, "fontSize": 10, "color": "#333"},
             "encoding": {"x": {"field": "label_x", "type": "quantitative", "scale": x_scale},
                          "text": {"field": "label"}}},
        ],
    }


def movers_spec(moved: dict[str, Any], anchors: list[str]) -> dict[str, Any]:
    """One line per moved (run, question): from the baseline's value (ring) to the current one
    (dot; green up, red down). A click on a dot opens that question's chunks and evidence."""
    rows = []
    for i, (r, anchor) in enumerate(zip(moved["rows"], anchors, strict=True)):
        q = r.get("question") or r["question_id"]
        short = q if len(q) <= 60 else q[:59] + "\u2026"
        label = f"{i + 1}. {r['run']} \u00b7 {short}"
        rows.append({"label": label, "run": r["run"], "question_id": r["question_id"], "baseline": r["baseline"],
                     "current": r["current"], "delta": r["delta"], "direction": "up" if r["delta"] > 0 else "down",
                     "anchor": anchor})
    metric = moved["metric"]
    x = {"type": "quantitative", "scale": {"domain": _domain([v for r in rows for v in (r["baseline"], r["current"])])}}
    return {
        "data": {"values": rows},
        "width": WIDTH,
        "height": {"step": 22},
        "encoding": {"y": {"field": "label", "type": "nominal", "sort": None, "title": None,
                           "axis": {"labelLimit": 420, "labelFontSize": 11}}},
        "layer": [
            {"mark": {"type": "rule", "color": "#999", "strokeWidth": 2},
             "encoding": {"x": {"field": "baseline", **x, "title": f"{metric}: baseline (ring) \u2192 current (dot)"},
                          "x2": {"field": "current"}}},
            {"mark": {"type": "point", "filled": False, "color": "#555", "size": 70},
             "encoding": {"x": {"field": "baseline", **x}}},
            {"mark": {"type": "point", "filled": True, "size": 90, "cursor": "pointer", "opacity": 1},
             "encoding": {"x": {"field": "current", **x},
                          "color": {"field": "direction", "type": "nominal", "title": None,
                                    "scale": {"domain": ["up", "down"], "range": ["#2e8540", "#d62728"]},
                                    "legend": {"orient": "top"}},
                          "tooltip": [{"field": "run"}, {"field": "question_id", "title": "question"},
                                      {"field": "baseline", "format": ".3f"}, {"field": "current", "format": ".3f"},
                                      {"field": "delta", "format": "+.3f", "title": "change"}]}},
        ],
    }


GAP_KINDS = [("supported", "supported in this run's top k", "#59a14f"),
             ("retriever_gap", "retriever gap: another run's top k has it", "#f28e2b"),
             ("corpus_gap", "corpus gap: no run's top k has it", "#e15759"),
             ("unknown", "unknown: a judge call failed", "#bab0ac")]


def gaps_spec(gaps: dict[str, Any]) -> dict[str, Any]:
    """Per run, its reference statements split into supported, retriever gap, corpus gap and
    unknown (stacked bars of counts)."""
    rows = []
    for run in gaps["runs"]:
        for order, (key, label, _) in enumerate(GAP_KINDS):
            n = gaps["per_run"][run][key]
            if n:
                rows.append({"run": run, "kind": label, "count": n, "order": order})
    present = [k for k in GAP_KINDS if any(r["kind"] == k[1] for r in rows)]
    return {
        "data": {"values": rows},
        "width": WIDTH,
        "height": {"step": 28},
        "mark": {"type": "bar"},
        "encoding": {
            "y": {"field": "run", "type": "nominal", "sort": gaps["runs"], "title": None},
            "x": {"field": "count", "type": "quantitative", "stack": "zero",
                  "title": f"reference statements ({gaps['statements']}), judged top {gaps['k']}"},
            "color": {"field": "kind", "type": "nominal", "title": None,
                      "scale": {"domain": [k[1] for k in present], "range": [k[2] for k in present]},
                      "legend": {"orient": "top", "columns": 2, "labelLimit": 320}},
            "order": {"field": "order", "type": "quantitative"},
            "tooltip": [{"field": "run"}, {"field": "kind"}, {"field": "count"}],
        },
    }


def confusion_spec(confusion: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The 2 x 2 chunk-level confusion matrix: rows human, columns judge; counts in the cells."""
    rows: list[dict[str, Any]] = []
    labels = {"human_not_relevant": "not relevant", "human_relevant": "relevant",
              "judge_not_relevant": "not relevant", "judge_relevant": "relevant"}
    for h, cols in confusion.items():
        for j, n in cols.items():
            rows.append({"human": labels.get(h, h), "judge": labels.get(j, j), "count": int(n)})
    top = max([int(r["count"]) for r in rows] or [0])
    order = ["not relevant", "relevant"]
    return {
        "data": {"values": rows},
        "width": 220, "height": 160,
        "encoding": {"x": {"field": "judge", "type": "nominal", "sort": order, "title": "judge says",
                           "axis": {"labelAngle": 0, "orient": "top"}},
                     "y": {"field": "human", "type": "nominal", "sort": order, "title": "humans say"}},
        "layer": [
            {"mark": {"type": "rect"},
             "encoding": {"color": {"field": "count", "type": "quantitative", "scale": {"scheme": "blues"},
                                    "legend": None},
                          "tooltip": [{"field": "human", "title": "humans"}, {"field": "judge", "title": "judge"},
                                      {"field": "count"}]}},
            {"mark": {"type": "text", "fontSize": 16, "fontWeight": "bold"},
             "encoding": {"text": {"field": "count", "type": "quantitative"},
                          "color": {"condition": {"test": f"datum.count > {top / 2}", "value": "white"},
                                    "value": "#222"}}},
        ],
    }


def scatter_spec(points: dict[str, Any], runs: list[str]) -> dict[str, Any]:
    """Per (run, question): the human metric (x) against the judged one (y), one metric pair at
    a time (a menu picks it); identical points are one circle sized by their count."""
    pairs = points["pairs"]
    axis = {"type": "quantitative", "scale": {"domain": [0, 1]}}
    return {
        "params": [{"name": "pair", "value": pairs[0],
                    "bind": {"input": "select", "options": pairs, "name": "metric pair: "}}],
        "width": 340, "height": 300,
        "layer": [
            {"data": {"values": [{"v": 0}, {"v": 1}]},
             "mark": {"type": "line", "color": "#bbb", "strokeDash": [4, 4]},
             "encoding": {"x": {"field": "v", **axis}, "y": {"field": "v", **axis}}},
            {"data": {"values": points["points"]},
             "transform": [{"filter": "datum.pair === pair"}],
             "mark": {"type": "circle", "opacity": 0.55},
             "encoding": {"x": {"field": "human", **axis, "title": "human value (per run and question)"},
                          "y": {"field": "judged", **axis, "title": "judged value"},
                          "size": {"field": "count", "type": "quantitative", "title": "questions",
                                   "scale": {"range": [25, 500]}, "legend": {"orient": "right"}},
                          "color": {**_runs_color(runs), "legend": {"orient": "right", "title": "run"}},
                          "tooltip": [{"field": "run"}, {"field": "human", "format": ".3f"},
                                      {"field": "judged", "format": ".3f"}, {"field": "count", "title": "questions"}]}},
        ],
    }


def trend_spec(history: list[dict[str, Any]], runs: list[str], metrics: list[str]) -> dict[str, Any]:
    """One row per metric: each run's value over the audits (line), its 95% CI (band)."""
    audits = list(dict.fromkeys(str(r["audit"]) for r in history))
    x = {"field": "audit", "type": "ordinal", "sort": audits, "title": None,
         "axis": {"labelAngle": -30, "labelLimit": 140}}
    return {
        "data": {"values": history},
        "facet": {"row": {"field": "metric", "type": "nominal", "sort": metrics, "title": None,
                          "header": {"labelAngle": 0, "labelAlign": "left", "labelFontSize": 12,
                                     "labelOrient": "top"}}},
        "spec": {
            "width": WIDTH, "height": 110,
            "layer": [
                {"mark": {"type": "area", "opacity": 0.15},
                 "encoding": {"x": x, "y": {"field": "ci_low", "type": "quantitative", "title": None,
                                            "scale": {"zero": False}},
                              "y2": {"field": "ci_high"}, "color": _runs_color(runs)}},
                {"mark": {"type": "line", "point": True},
                 "encoding": {"x": x, "y": {"field": "value", "type": "quantitative"}, "color": _runs_color(runs),
                              "tooltip": [{"field": "audit"}, {"field": "run"}, {"field": "metric"},
                                          {"field": "value", "format": ".3f"}, {"field": "ci_low", "format": ".3f"},
                                          {"field": "ci_high", "format": ".3f"}]}},
            ],
        },
        "resolve": {"scale": {"y": "independent"}},
    }


def differences_spec(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The audit's paired differences from the baseline: one row per (run, metric), the mean
    difference (dot) and its 95% CI (line), red when the check failed; the allowed drop as a
    tick."""
    rows = []
    for c in checks:
        if c.get("diff") is None:
            continue
        rows.append({"check": f"{c['run']} \u00b7 {c['metric']}", "diff": c["diff"], "lo": c.get("diff_ci_low"),
                     "hi": c.get("diff_ci_high"), "verdict": c.get("verdict") or "pass",
                     "allowed": -c["max_drop"] if c.get("max_drop") is not None else None,
                     "p_holm": c.get("p_holm")})
    order = [r["check"] for r in rows]
    x = {"type": "quantitative"}
    y = {"field": "check", "type": "nominal", "sort": order, "title": None, "axis": {"labelLimit": 300}}
    return {
        "data": {"values": rows},
        "width": WIDTH, "height": {"step": 24},
        "layer": [
            {"mark": {"type": "rule", "color": "#888", "strokeDash": [3, 3]}, "data": {"values": [{"zero": 0}]},
             "encoding": {"x": {"field": "zero", **x}}},
            {"mark": {"type": "rule", "strokeWidth": 2.5},
             "encoding": {"y": y,
                          "x": {"field": "lo", **x, "title": "mean paired difference from the baseline, 95% CI"},
                          "x2": {"field": "hi"},
                          "color": {"field": "verdict", "type": "nominal", "title": None,
                                    "scale": {"domain": ["pass", "regression"], "range": ["#4e79a7", "#d62728"]},
                                    "legend": {"orient": "top"}}}},
            {"mark": {"type": "tick", "color": "#d62728", "thickness": 2},
             "encoding": {"y": y, "x": {"field": "allowed", **x}}},
            {"mark": {"type": "point", "filled": True, "size": 60, "opacity": 1},
             "encoding": {"y": y, "x": {"field": "diff", **x}, "color": {"field": "verdict", "type": "nominal"},
                          "tooltip": [{"field": "check"}, {"field": "diff", "format": "+.3f"},
                                      {"field": "lo", "format": "+.3f"}, {"field": "hi", "format": "+.3f"},
                                      {"field": "allowed", "format": "+.3f", "title": "allowed drop"},
                                      {"field": "p_holm", "format": ".4f"}, {"field": "verdict"}]}},
        ],
    }
