"""Turning a model's reply into a validated answer, and the JSON schema we ask for.

Three things live here:

* :func:`extract_json` finds the JSON object in a reply: the whole text, a fenced block
  (```` ```json ... ``` ````), or the first balanced ``{...}`` in prose. Servers without a JSON
  mode (and some with one) wrap the answer in prose or code fences.
* :func:`parse_answer` validates it with a pydantic model and raises :class:`InvalidOutput`
  with a short, quotable description of what is wrong (this text goes into the repair request).
* :func:`strict_json_schema` derives a schema from a pydantic model that OpenAI's strict
  structured-output mode accepts: every object has ``additionalProperties: false`` and lists
  every property in ``required``; ``$ref`` are inlined; ``title``/``default``/``description`` are
  dropped (docstrings are not instructions; the prompt is); a small
  integer range (``ge``/``le``) becomes an ``enum`` (accepted by every grammar engine).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "InvalidOutput",
    "extract_json",
    "parse_answer",
    "strict_json_schema",
    "format_validation_error",
]


class InvalidOutput(Exception):
    """A reply that is not a valid answer. ``message`` is short and safe to quote back to the
    model in a repair request; ``truncated`` is set when the reply was cut off
    (``finish_reason == "length"``)."""

    def __init__(self, message: str, *, truncated: bool = False) -> None:
        self.message = message
        self.truncated = truncated
        super().__init__(message)


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.S)


def extract_json(text: str) -> Any:
    """The JSON value in ``text``.

    Tried in order: the stripped text as a whole; each fenced code block (```` ```json ````
    blocks first, then unlabelled ones); the first ``{`` in the text from which a complete JSON
    object can be decoded (so prose before and after is ignored). Raises :class:`InvalidOutput`
    when none of these yields JSON.
    """
    if text is None:
        raise InvalidOutput("the reply is empty")
    stripped = text.strip().lstrip("\ufeff")
    if not stripped:
        raise InvalidOutput("the reply is empty")
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass

    fences = _FENCE.findall(stripped)
    ordered = [body for lang, body in fences if lang.lower() in ("json", "json5", "jsonc")]
    ordered += [body for lang, body in fences if lang.lower() not in ("json", "json5", "jsonc")]
    for body in ordered:
        try:
            return json.loads(body.strip())
        except json.JSONDecodeError:
            continue

    decoder = json.JSONDecoder()
    start = stripped.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(stripped, start)
            return value
        except json.JSONDecodeError:
            start = stripped.find("{", start + 1)
    raise InvalidOutput("the reply contains no valid JSON object")


def format_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """A one-line summary of a pydantic error: ``grade: Input should be less than or equal to 3;
    supports.0.evidence: Field required``. At most ``limit`` errors are listed."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def parse_answer(text: str | None, model: type[M], *, truncated: bool = False) -> M:
    """Extract and validate the answer in ``text`` with ``model``.

    ``truncated=True`` (the server said ``finish_reason == "length"``) makes any reply invalid,
    even one whose prefix happens to parse: a cut-off list may be missing items.
    """
    if truncated:
        raise InvalidOutput(
            "the reply was cut off (finish_reason=length) before the JSON was complete",
            truncated=True,
        )
    if text is None:
        raise InvalidOutput("the reply has no text content")
    value = extract_json(text)
    if not isinstance(value, dict):
        raise InvalidOutput(f"expected a JSON object, got a JSON {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise InvalidOutput("the JSON does not match the schema: " + format_validation_error(exc)) from None


def _inline_refs(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 32:
        raise ValueError("schema too deep or recursive; cannot inline $ref")
    if isinstance(node, dict):
        if "$ref" in node:
            ref = node["$ref"]
            name = ref.rsplit("/", 1)[-1]
            target = copy.deepcopy(defs[name])
            extra = {k: v for k, v in node.items() if k != "$ref"}
            target.update(extra)
            return _inline_refs(target, defs, depth + 1)
        return {k: _inline_refs(v, defs, depth + 1) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs, depth + 1) for v in node]
    return node


def _make_strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_make_strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k in ("title", "default", "description"):
            continue
        if k == "properties" and isinstance(v, dict):
            # keys here are property names, not schema keywords
            out[k] = {name: _make_strict(sub) for name, sub in v.items()}
        else:
            out[k] = _make_strict(v)
    if out.get("type") == "object" or "properties" in out:
        props = out.get("properties", {})
        out["type"] = "object"
        out["properties"] = props
        out["required"] = list(props.keys())
        out["additionalProperties"] = False
    if out.get("type") == "integer" and "minimum" in out and "maximum" in out:
        lo, hi = out["minimum"], out["maximum"]
        if isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo <= 16:
            out.pop("minimum")
            out.pop("maximum")
            out["enum"] = list(range(lo, hi + 1))
    return out


def strict_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A JSON schema for ``model`` that OpenAI's strict mode accepts (see module docstring).

    The schema is stricter than the pydantic model only in requiring fields that have defaults
    (e.g. ``reason``); pydantic still validates the reply, so nothing the schema omits is lost.
    """
    raw = model.model_json_schema()
    defs = raw.get("$defs", {})
    return _make_strict(_inline_refs(raw, defs))
