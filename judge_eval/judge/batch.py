"""Batch mode: the judge's tasks answered in bulk, through a provider's Batch API or a file judged
elsewhere, into the same cache as synchronous answers.

Two ways, one request format (OpenAI's batch-request JSONL, which vLLM's ``run-batch`` also
reads): one line per task, ``{"custom_id": <cache key>, "method": "POST", "url":
"/v1/chat/completions", "body": <the chat-completions body the judge would send>}``.

- :class:`OpenAIBatch` (``score --batch openai``): uploads the pending tasks as a file, creates a
  batch (half the price, a 24 h window), polls it and stores every valid answer in the cache.
  Every step is recorded in the cache database the moment it happens (``batches`` and
  ``batch_items``: the uploaded file's id, the batch id), so a run killed while polling resumes
  polling the same batch and never pays twice; a batch created by a run killed before it could
  record the id is found again by our id in its metadata. Items the batch did not answer
  (failed, expired, invalid answers) stay pending: the synchronous run that follows asks them
  (with retries and the repair) and reports what still fails. A batch that fails as a whole is a
  :class:`~judge_eval.errors.JudgeUnavailableError`.
- :func:`export_requests` / :func:`import_results` (``judge-eval batch export|import``): the same
  file for another engine (a vLLM cluster); the answers file is validated line by line and
  loaded into the cache (all or nothing), so a following ``score`` makes no call for them.

The cache key of a task is computed as the synchronous path computes it (the judge core's
``key_request``, the transport's current format and parameters), so a batch answer is a cache
hit for the same judge. A reasoning model's parameters cannot be learnt inside a batch: when the
endpoint's format or parameters are not known yet, one task is first asked synchronously (the
probe), and the batch is built after it.

Tasks come as :class:`TaskSpec` (a prompt name, its inputs, a sample index): the runner turns its
plan into specs (:func:`judge_eval.run.batch_specs`); this module knows no plan.
"""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_eval.atomic import write_text
from judge_eval.cache import ResponseCache, cache_key, json_object_line, read_text_file
from judge_eval.errors import ConfigError, InputError, JudgeCallError, JudgeUnavailableError
from judge_eval.judge.core import JudgeCore
from judge_eval.judge.openai_judge import OpenAITransport, completion_text, usage_of
from judge_eval.judge.parsing import InvalidOutput
from judge_eval.judge.prompts import load_prompt
from judge_eval.usage import Usage

__all__ = [
    "BatchItem",
    "BatchReport",
    "OpenAIBatch",
    "TaskSpec",
    "cached_value",
    "export_requests",
    "import_results",
    "pending_items",
]

#: the provider statuses after which a batch changes no more
FINAL_STATUSES = frozenset({"completed", "expired", "failed", "cancelled"})


@dataclass(frozen=True)
class TaskSpec:
    """One judge task: the prompt name (``decompose``, ``judge_chunk``), its inputs and the sample."""

    task: str
    inputs: Mapping[str, Any]
    sample: int = 0


@dataclass
class BatchItem:
    """A pending task as a batch request: its cache ``key`` (the line's custom_id), the key
    ``request`` (what the key hashes), the prompt's ``inputs`` (to check the answer) and the
    chat-completions ``body``."""

    spec: TaskSpec
    key: str
    identity: str
    prompt: str
    request: dict[str, Any]
    inputs: dict[str, Any]
    body: dict[str, Any]

    def row(self) -> dict[str, Any]:
        return {"key": self.key, "identity": self.identity, "prompt": self.prompt, "request": self.request,
                "inputs": self.inputs, "body": self.body}


@dataclass
class BatchReport:
    """What batch mode did: ``batches`` (provider ids collected), ``calls`` (batch requests
    answered: what is billed), ``usage`` (their tokens), ``stored`` (answers put in the cache),
    ``not_answered`` (items left to the synchronous run, by cause: ``expired``, ``http_400``,
    ``invalid_output`` ...), ``sync_calls`` / ``sync_usage`` (the synchronous probe)."""

    batches: list[str] = field(default_factory=list)
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    stored: int = 0
    not_answered: Counter[str] = field(default_factory=Counter)
    sync_calls: int = 0
    sync_usage: Usage = field(default_factory=Usage)
    sync_errors: list[JudgeCallError] = field(default_factory=list)

    def __iadd__(self, other: BatchReport) -> BatchReport:
        self.batches += other.batches
        self.calls += other.calls
        self.usage = self.usage + other.usage
        self.stored += other.stored
        self.not_answered.update(other.not_answered)
        self.sync_calls += other.sync_calls
        self.sync_usage = self.sync_usage + other.sync_usage
        self.sync_errors += other.sync_errors
        return self


# ----------------------------------------------------------------------------- planning


def _transport(core: JudgeCore, what: str) -> OpenAITransport:
    transport = getattr(core, "transport", None)
    if not isinstance(core, JudgeCore) or not isinstance(transport, OpenAITransport):
        raise ConfigError(f"{what} needs the openai judge (an OpenAI-compatible endpoint), not "
                          f"{getattr(core, 'identity', core)!r}", option="--judge")
    return transport


def _cache(core: JudgeCore, what: str) -> ResponseCache:
    cache = core.cache
    if cache is None or cache.mode not in ("use", "refresh"):
        mode = "off" if cache is None else cache.mode
        raise ConfigError(f"{what} stores its answers in the cache: use --cache-mode use or refresh, not {mode}",
                          option="--cache-mode")
    return cache


def cached_value(core: JudgeCore, spec: TaskSpec) -> Any | None:
    """The validated answer the cache holds for ``spec`` (None: none, or one that no longer
    validates). Counts no hit or miss."""
    if core.cache is None:
        return None
    prompt = core.prompts[spec.task]
    request = core.request(prompt, spec.inputs, spec.sample)
    entry = core.cache.peek(cache_key(core.key_request(request)))
    if entry is None:
        return None
    try:
        return prompt.validate(entry.response, request.inputs)
    except InvalidOutput:
        return None


def pending_items(core: JudgeCore, specs: Iterable[TaskSpec]) -> list[BatchItem]:
    """The specs whose answers the cache does not hold, as batch requests (one per key, in the
    order given), rendered with the transport's current format and parameters."""
    transport = _transport(core, "batch mode")
    items: dict[str, BatchItem] = {}
    for spec in specs:
        if cached_value(core, spec) is not None:
            continue
        prompt = core.prompts[spec.task]
        request = core.request(prompt, spec.inputs, spec.sample)
        stored = core.key_request(request)
        key = cache_key(stored)
        if key not in items:
            items[key] = BatchItem(spec, key, core.identity, prompt.id, stored, dict(request.inputs),
                                   transport.request_body(request))
    return list(items.values())


def request_lines(requests: Iterable[tuple[str, Mapping[str, Any]]], url: str) -> str:
    """The batch-request JSONL of ``(custom_id, body)`` pairs."""
    return "".join(
        json.dumps({"custom_id": key, "method": "POST", "url": url, "body": body}, ensure_ascii=False) + "\n"
        for key, body in requests
    )


def _new_id() -> str:
    return f"jeb-{secrets.token_hex(8)}"


# ----------------------------------------------------------------------------- results


@dataclass
class _Result:
    """One line of a batch output (or error) file."""

    custom_id: str
    status: int | None  # the HTTP status of the request; None: it never ran
    body: Any
    error: Any
    line: int


def _parse_result(text: str, lineno: int, path: str | None) -> _Result:
    """A result line (OpenAI's and vLLM's shape); InputError naming the line and field."""

    def bad(msg: str, fld: str | None = None) -> InputError:
        return InputError(msg, path=path, line=lineno, field=fld)

    obj = json_object_line(text, lineno, path, " (a batch result line)")
    custom_id = obj.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        raise bad("missing or not a non-empty string", "custom_id")
    response = obj.get("response")
    error = obj.get("error")
    if response is None:
        if not error:
            raise bad("a result needs a 'response' object or an 'error'", "response")
        return _Result(custom_id, None, None, error, lineno)
    if not isinstance(response, dict):
        raise bad("not a JSON object", "response")
    status = response.get("status_code")
    if not isinstance(status, int) or isinstance(status, bool):
        raise bad("missing or not an integer", "response.status_code")
    body = response.get("body")
    if status == 200:
        if not isinstance(body, dict):
            raise bad("missing or not a JSON object", "response.body")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad("missing or empty (a chat completion has choices)", "response.body.choices")
        message = choices[0].get("message")
        if not isinstance(message, dict) or not (message.get("content") is None
                                                 or isinstance(message.get("content"), str)):
            raise bad("missing, or its content is not a string", "response.body.choices[0].message")
        usage = body.get("usage")
        if usage is not None and not isinstance(usage, dict):
            raise bad("not a JSON object", "response.body.usage")
    return _Result(custom_id, status, body, error, lineno)


def _parse_results(text: str, path: str | None) -> list[_Result]:
    results: list[_Result] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        result = _parse_result(line, lineno, path)
        if result.custom_id in seen:
            raise InputError(f"custom_id {result.custom_id!r} again (first on line {seen[result.custom_id]})",
                             path=path, line=lineno, field="custom_id")
        seen[result.custom_id] = lineno
        results.append(result)
    return results


def _cause(result: _Result) -> str:
    if result.status is None:
        code = result.error.get("code") if isinstance(result.error, dict) else None
        return "expired" if code == "batch_expired" else str(code or "batch_error")
    return f"http_{result.status}"


@dataclass
class _Ingest:
    entries: list[dict[str, Any]] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    billed: int = 0
    usage: Usage = field(default_factory=Usage)
    failed: Counter[str] = field(default_factory=Counter)


def _ingest(results: Iterable[_Result], items: Mapping[str, Mapping[str, Any]]) -> _Ingest:
    """Validate each answered result against its item's prompt: the valid answers as cache
    entries, the rest counted by cause. ``items``: key -> batch item row."""
    out = _Ingest()
    for r in results:
        item = items[r.custom_id]
        if r.status != 200:
            out.failed[_cause(r)] += 1
            out.states[r.custom_id] = "failed"
            continue
        usage = usage_of(r.body.get("usage"))
        out.billed += 1
        out.usage = out.usage + usage
        text, truncated = completion_text(r.body)
        prompt = load_prompt(item["prompt"])
        try:
            value = prompt.parse_answer(text, item["inputs"], truncated=truncated)
        except InvalidOutput as bad:
            out.failed["truncated" if bad.truncated else "invalid_output"] += 1
            out.states[r.custom_id] = "failed"
            continue
        out.entries.append({"key": r.custom_id, "identity": item["identity"], "prompt": item["prompt"],
                            "request": item["request"], "response": value.model_dump(mode="json"), "usage": usage})
        out.states[r.custom_id] = "answered"
    return out


# ----------------------------------------------------------------------------- export / import


@dataclass
class ExportReport:
    """``written``: request lines in the file; ``batch``: the id recorded in the cache."""

    written: int
    batch: str | None


def export_requests(core: JudgeCore, specs: Iterable[TaskSpec], dest: str | Path) -> ExportReport:
    """Write the pending tasks of ``specs`` as a batch-request JSONL to ``dest`` (replaced
    atomically) and record them in the cache, so :func:`import_results` can store their answers.
    Nothing is written when nothing is pending."""
    transport = _transport(core, "batch export")
    cache = _cache(core, "batch export")
    items = pending_items(core, specs)
    if not items:
        return ExportReport(0, None)
    batch_id = _new_id()
    cache.add_batch({"id": batch_id, "kind": "export", "endpoint": transport.endpoint, "identity": core.identity},
                    [item.row() for item in items])
    write_text(dest, request_lines(((i.key, i.body) for i in items), transport.batch_url), option="--out")
    cache.update_batch(batch_id, state="submitted")
    return ExportReport(len(items), batch_id)


@dataclass
class ImportReport:
    """``lines`` read; ``stored`` new answers; ``already`` answers the cache held;
    ``not_answered``: items without a usable answer, by cause (left to a following ``score``)."""

    lines: int = 0
    stored: int = 0
    already: int = 0
    not_answered: Counter[str] = field(default_factory=Counter)


def import_results(cache: ResponseCache, src: str | Path) -> ImportReport:
    """Load a batch output file (OpenAI's output or error file, vLLM ``run-batch`` output) for
    requests exported from this cache (:func:`export_requests`) into it.

    Every line is checked first; a bad line (not JSON, no ``custom_id``, a ``custom_id`` this
    cache did not export or that appears twice, a 200 response that is not a chat completion)
    raises :class:`InputError` naming the line and field, and nothing is stored. Then the
    answers that validate are stored in one transaction; failed requests and invalid answers are
    counted in ``not_answered`` and stay pending (a following ``score`` asks them)."""
    path = str(src)
    text = read_text_file(src)
    if cache.mode not in ("use", "refresh"):
        raise ConfigError(f"batch import writes to the cache; its mode is {cache.mode}", option="--cache-mode")
    results = _parse_results(text, path)
    items: dict[str, dict[str, Any]] = {}
    for r in results:
        found = cache.batch_items(key=r.custom_id)
        if not found:
            raise InputError(f"custom_id {r.custom_id[:80]!r} is not a request exported from this cache "
                             f"({cache.path}); import into the cache `judge-eval batch export` wrote to",
                             path=path, line=r.line, field="custom_id")
        items[r.custom_id] = found[0]
    report = ImportReport(lines=len(results))
    fresh = [r for r in results if cache.peek(r.custom_id) is None]
    report.already = len(results) - len(fresh)
    got = _ingest(fresh, items)
    report.stored = cache.put_many(got.entries)
    report.not_answered = got.failed
    by_batch: dict[str, dict[str, str]] = {}
    for key, state in got.states.items():
        by_batch.setdefault(items[key]["batch"], {})[key] = state
    for batch_id, states in by_batch.items():
        cache.set_item_states(batch_id, states)
    return report


# ----------------------------------------------------------------------------- the Batch API


class OpenAIBatch:
    """``--batch openai``: pending tasks through the OpenAI Batch API (module docstring).

    ``poll``: seconds between two looks at a running batch. ``progress``: a bar on stderr with
    the batch's counts. ``notify``: called with one-line messages (batch created, resumed,
    finished); default none.
    """

    def __init__(self, core: JudgeCore, *, poll: float = 30.0, progress: bool = False,
                 notify: Callable[[str], None] | None = None) -> None:
        self.core = core
        self.transport = _transport(core, "--batch openai")
        self.cache = _cache(core, "--batch openai")
        if not (isinstance(poll, (int, float)) and 0 < poll <= 3600):
            raise ConfigError(f"must be a number of seconds in (0, 3600], got {poll!r}", option="--batch-poll")
        self.poll = float(poll)
        self.progress = progress
        self.notify = notify or (lambda message: None)

    def cached(self, spec: TaskSpec) -> Any | None:
        """The validated cached answer of ``spec`` (None: none)."""
        return cached_value(self.core, spec)

    async def run(self, specs: list[TaskSpec]) -> BatchReport:
        """Collect this endpoint's unfinished batches (a killed run's), then put the pending
        ``specs`` through one new batch and store its answers."""
        report = BatchReport()
        for earlier in self.cache.batches(kind="openai", endpoint=self.transport.endpoint, open_only=True):
            self.notify(f"resuming batch {earlier['remote_id'] or earlier['id']} of an earlier run")
            await self._complete(earlier, report, resumed=True)
        pending = [s for s in specs if self.cached(s) is None]
        if pending and not self.transport.known():
            await self._probe(pending[0], report)
        items = pending_items(self.core, specs)
        if not items:
            return report
        row: dict[str, Any] = {"id": _new_id(), "kind": "openai", "endpoint": self.transport.endpoint,
                               "identity": self.core.identity, "input_file": None, "remote_id": None}
        self.cache.add_batch(row, [item.row() for item in items])
        await self._complete(row, report, resumed=False)
        return report

    async def _probe(self, spec: TaskSpec, report: BatchReport) -> None:
        """Ask one task synchronously, so the endpoint's format and parameters are known before
        the batch is built. An endpoint that refuses the judge stops the run."""
        try:
            resp = await self.core.ask(spec.task, spec.sample, **spec.inputs)
        except JudgeCallError as exc:
            report.sync_calls += int(exc.calls or 0)
            report.sync_usage = report.sync_usage + (exc.usage if isinstance(exc.usage, Usage) else Usage())
            if not self.transport.known():
                raise JudgeUnavailableError(
                    exc.cause, f"the judge endpoint failed the request sent before the batch ({exc.cause}): "
                    f"{exc.message}") from None
            report.sync_errors.append(exc)  # a bad answer of a working endpoint: the run reports it
            return
        report.sync_calls += resp.calls
        report.sync_usage = report.sync_usage + resp.usage
        if not resp.cache_hit:  # paid here: the run must not count it as a cache hit
            request = self.core.request(self.core.prompts[spec.task], spec.inputs, spec.sample)
            self.core.batch_answered.add(cache_key(self.core.key_request(request)))

    async def _complete(self, row: dict[str, Any], report: BatchReport, *, resumed: bool) -> None:
        """Upload, create (each step recorded at once), poll and collect one batch."""
        client = self.transport.client()
        items = {item["key"]: item for item in self.cache.batch_items(row["id"])}
        had_file = row["input_file"] is not None
        if not had_file:
            data = request_lines(((k, item["body"]) for k, item in items.items()), self.transport.batch_url)
            uploaded = await self._api(lambda: client.files.create(file=(f"{row['id']}.jsonl", data.encode("utf-8")),
                                                                    purpose="batch"))
            row["input_file"] = uploaded.id
            self.cache.update_batch(row["id"], state="uploaded", input_file=uploaded.id)
        if row["remote_id"] is None:
            # a run killed between creating the batch and recording its id: find it by our id
            found = await self._find(client, row["id"]) if resumed and had_file else None
            batch = found or await self._api(lambda: client.batches.create(
                input_file_id=row["input_file"], endpoint=self.transport.batch_url,  # type: ignore[arg-type]
                completion_window="24h", metadata={"judge_eval_batch": row["id"]}))
            row["remote_id"] = batch.id
            self.cache.update_batch(row["id"], state="submitted", remote_id=batch.id, status=batch.status)
            if not found:
                self.notify(f"batch {batch.id} created with {len(items)} requests; polling every {self.poll:g} s "
                            "(a killed run resumes it)")
        batch = await self._wait(client, row)
        report.batches.append(batch.id)
        if batch.status == "failed":
            self.cache.set_item_states(row["id"], dict.fromkeys(items, "failed"))
            self.cache.update_batch(row["id"], state="failed", status=batch.status)
            errors = getattr(batch.errors, "data", None) or []
            detail = "; ".join(f"line {e.line}: {e.message}" if e.line else str(e.message) for e in errors[:3])
            raise JudgeUnavailableError("batch_failed", f"batch {batch.id} failed: {detail or 'no reason given'} "
                                        f"({len(items)} requests, none answered; nothing was stored)")
        results: list[_Result] = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self._download(client, file_id)
                for r in _parse_results(content, f"{batch.id} {file_id}"):
                    if r.custom_id in items:
                        results.append(r)
        got = _ingest(results, items)
        report.stored += self.cache.put_many(got.entries)
        self.core.batch_answered.update(e["key"] for e in got.entries)
        report.calls += got.billed
        report.usage = report.usage + got.usage
        report.not_answered.update(got.failed)
        missing = [k for k in items if k not in got.states]
        report.not_answered["not_run" if batch.status != "expired" else "expired"] += len(missing)
        self.cache.set_item_states(row["id"], {**got.states, **dict.fromkeys(missing, "failed")})
        self.cache.update_batch(row["id"], state="done", status=batch.status)
        left = sum(got.failed.values()) + len(missing)
        self.notify(f"batch {batch.id} {batch.status}: {len(got.entries)} answers stored"
                    + (f", {left} left to ask synchronously" if left else ""))

    async def _wait(self, client: Any, row: dict[str, Any]) -> Any:
        """Poll the batch until it is final, recording its status and counts."""
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(desc=f"batch {row['remote_id']}", unit="request", file=sys.stderr, leave=True)
        try:
            while True:
                batch = await self._api(lambda: client.batches.retrieve(row["remote_id"]))
                counts = batch.request_counts
                done = (counts.completed + counts.failed) if counts is not None else 0
                self.cache.update_batch(row["id"], status=batch.status,
                                        counts=counts.model_dump() if counts is not None else None)
                if bar is not None:
                    bar.total = counts.total if counts is not None else None
                    bar.n = done
                    bar.set_postfix(status=batch.status, failed=counts.failed if counts is not None else 0,
                                    refresh=False)
                    bar.refresh()
                if batch.status in FINAL_STATUSES:
                    return batch
                await asyncio.sleep(self.poll)
        finally:
            if bar is not None:
                bar.close()

    async def _download(self, client: Any, file_id: str) -> str:
        content = await self._api(lambda: client.files.content(file_id))
        return str(content.text)

    async def _find(self, client: Any, batch_id: str) -> Any | None:
        """The provider's batch carrying our id in its metadata (created by a run killed before
        it could record the batch id), if any."""
        async for batch in client.batches.list(limit=100):
            if (batch.metadata or {}).get("judge_eval_batch") == batch_id:
                return batch
        return None

    async def _api(self, call: Callable[[], Any]) -> Any:
        """Await one files/batches call (``call()`` makes the coroutine), retrying 429, 5xx,
        timeouts and dropped connections with the transport's backoff (``max_attempts``); other
        failures become a JudgeUnavailableError naming the status (the key scrubbed)."""
        import openai

        attempts = self.transport.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                return await call()
            except openai.APIStatusError as exc:
                status = int(exc.status_code)
                if (status == 429 or status >= 500) and attempt < attempts:
                    await asyncio.sleep(self._backoff(attempt))
                    continue
                text = self.transport.scrub(str(exc.message))[:300]
                raise JudgeUnavailableError(f"http_{status}", f"batch API: HTTP {status}: {text}") from None
            except openai.APIError as exc:  # timeouts, connection errors, undecodable answers
                if attempt < attempts:
                    await asyncio.sleep(self._backoff(attempt))
                    continue
                message = f"batch API: {self.transport.scrub(str(exc))[:300]}"
                raise JudgeUnavailableError("connection", message) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int) -> float:
        return min(self.transport.retry_base_wait * 2 ** (attempt - 1), self.transport.max_retry_wait)
