"""Check judge-eval's Label Studio and Argilla files with the tools' own SDKs.

Not part of the test suite (the SDKs are large and Argilla's needs a server for most things);
run it by hand after changing judge_eval/labels/formats.py, in a scratch environment:

    python -m venv /tmp/fmtcheck && /tmp/fmtcheck/bin/pip install argilla==2.8.0 label-studio-sdk==2.1.2
    /tmp/fmtcheck/bin/python tests/data/labels/check_tool_formats.py \
        tests/data/labels/expected/tiny.label-studio.json \
        tests/data/labels/expected/tiny.label-studio.label_config.xml \
        tests/data/labels/expected/tiny.argilla.json tests/data/labels/expected/tiny.argilla.settings.json

Label Studio: LabelInterface(config).validate() (schema, names, toName, attributes), every
$variable of an object tag present in each task's data, validate_prediction() on every
prediction. Argilla: Settings.from_json() + validate(), Record.from_dict() on every record, its
fields equal to the settings' fields, suggestions naming existing questions with valid values.
"""
import json
import sys

ls_tasks, ls_config, ar_records, ar_settings = sys.argv[1:5]
from label_studio_sdk.label_interface import LabelInterface

li = LabelInterface(open(ls_config).read())
li.validate()  # schema, unique names, toName, tag attributes
tasks = json.load(open(ls_tasks))
errors = []
for i, t in enumerate(tasks):
    for obj in li.objects:  # every $variable of the config is in the task data
        if obj.value_is_variable and t["data"].get(obj.value_name) is None:
            errors.append((i, "missing data", obj.value_name))
    for p in t.get("predictions", []):
        e = li.validate_prediction(p, return_errors=True)
        if e:
            errors.append((i, e))
    for a in t.get("annotations", []):
        e = li.validate_prediction(a, return_errors=True)
        if e:
            errors.append((i, "annotation", e))
print("label studio: config valid; tasks", len(tasks), "with predictions",
      sum(1 for t in tasks if t.get("predictions")), "errors", errors[:5])
from unittest import mock

import argilla as rg

rg.Argilla._get_default = classmethod(lambda cls: mock.MagicMock())  # no server: only the SDK models are used
from argilla.records._resource import Record

settings = rg.Settings.from_json(ar_settings)
settings.validate()
print("argilla settings:", [(f.name, f.type) for f in settings.fields], [(q.name, q.type) for q in settings.questions],
      [m.name for m in settings.metadata])
recs = json.load(open(ar_records))
names = {f.name for f in settings.fields}
qs = {q.name: q for q in settings.questions}
meta = {m.name for m in settings.metadata}
bad = []
for i, d in enumerate(recs):
    r = Record.from_dict(d)
    if set(r.fields.keys()) != names:
        bad.append((i, "fields"))
    for s in r.suggestions:
        if s.question_name not in qs:
            bad.append((i, "suggestion", s.question_name))
        if s.question_name == "grade" and s.value not in [o["value"] for o in qs["grade"]._model.settings.options]:
            bad.append((i, "grade value"))
        if s.question_name == "evidence":
            labels = set(qs["evidence"].labels)
            for sp in s.value:
                if sp["label"] not in labels or not (0 <= sp["start"] < sp["end"] <= len(d["fields"]["chunk"])):
                    bad.append((i, "span", sp))
        s.api_model()  # the SDK's own model of a suggestion accepts it
    if not set(r.metadata.keys()) <= meta:
        bad.append((i, "metadata", set(r.metadata) - meta))
    for resp in r.responses:
        resp.api_model() if hasattr(resp, "api_model") else None
print("argilla records", len(recs), "problems", bad[:5])
sys.exit(1 if errors or bad else 0)
