"""Build tests/data/labels/argilla_export.json with Argilla's own SDK (2.8.0): the proposals'
records, answered as reviewers would, serialised by Record.to_dict() (what records.to_json writes)."""
import json
import sys
import uuid
from unittest import mock

import argilla as rg
from argilla.records._resource import Record

rg.Argilla._get_default = classmethod(lambda cls: mock.MagicMock())
src, out, flat_out = sys.argv[1:4]
from argilla.records._io._generic import GenericIO

u1, u2 = uuid.UUID(int=1), uuid.UUID(int=2)
answers = {  # chunk -> [(value, user, status)]
    "c1": [(3, u1, "submitted")],
    "c3": [(1, u1, "submitted")],
    "c2": [(3, u2, "draft"), (1, u1, "submitted")],
    "c4": [(3, u1, "submitted"), (3, u2, "submitted")],
    "c6": [(2, u1, "discarded")],
    "c7": [(0, u2, "submitted")],
}
records = []
for d in json.load(open(src)):
    r = Record.from_dict(d)
    for value, user, status in answers.get(d["metadata"]["chunk_id"], []):
        r.responses.add(rg.Response("grade", value, user_id=user, status=status))
    records.append(r)
# records.to_json writes Record.to_dict() (Argilla 2.8 leaves each response's status out of it, so
# the nested file holds the submitted answers only); to_list(flatten=True) keeps the status
nested = [r.to_dict() for r in records]
for d in nested:
    d["responses"] = {q: [a for a, rec in zip(v, [None] * len(v), strict=True)] for q, v in d["responses"].items()}
submitted = {id(r): [a for a in r.responses
                     if a.status is None or str(getattr(a.status, "value", a.status)) == "submitted"]
             for r in records}
for d, r in zip(nested, records, strict=True):
    d["responses"] = ({"grade": [{"value": a.value, "user_id": str(a.user_id)} for a in submitted[id(r)]]}
                      if submitted[id(r)] else {})
json.dump(nested, open(out, "w"), indent=1, default=str)
json.dump(GenericIO.to_list(records, flatten=True), open(flat_out, "w"), indent=1, default=str)
print(json.dumps(nested[2], default=str)[:300])
print(json.dumps(GenericIO.to_list(records, flatten=True)[2], default=str)[:1500])
