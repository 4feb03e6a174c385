"""The judge core: the one path every LLM-backed judge takes, whatever the backend.

::

    prompt.render(inputs) -> cache lookup, or a claim on the key (ResponseCache.acquire)
      -> transport.complete(request) -> prompt.parse_answer (pydantic + the prompt's checks)
      -> on an invalid answer ONE repair request -> cache.put -> JudgeResponse

A backend is a :class:`Transport`: given the rendered messages, the decoding parameters and the
answer's JSON schema (a :class:`CompletionRequest`), it returns the reply text and what it cost
(a :class:`Completion`). Everything else lives here once: the cache key, cross-process claims,
``replay`` misses, parsing, the checks, the repair turn, storing, and the accounting of calls and
tokens (also of a failed task, on its :class:`~judge_eval.errors.JudgeCallError`).
:class:`~judge_eval.judge.openai_judge.OpenAITransport` is the built-in transport; plugins add
others (``docs/plugins.md``). The evidence check (is each quote in the chunk?) is not a check of
the answer's validity: the runner applies it to every judge's answer, cached or not
(:func:`judge_eval.judge.evidence.verify`).

Cache key: the SHA-256 of the canonical JSON of :meth:`JudgeCore.key_request`: the identity, the
prompt id, the rendered messages, the decoding parameters for this sample (temperature, top_p,
seed + sample, max_tokens), the sample index, plus what the transport says also changes the answer
(:meth:`Transport.key_fields`: for the OpenAI transport the model and the response format).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from judge_eval.cache import CacheEntry, Claim, ResponseCache, cache_key
from judge_eval.errors import JudgeCallError
from judge_eval.judge.parsing import InvalidOutput
from judge_eval.judge.prompts import Prompt, PromptSelection, load_prompt, select_prompts
from judge_eval.judge.protocol import ChunkVerdict, ChunkVerdicts, JudgeResponse, Statements
from judge_eval.usage import Usage

__all__ = ["Completion", "CompletionRequest", "Decoding", "JudgeCore", "Transport", "repair_text"]

#: the fields of a key request the core owns; a transport's key_fields may not use these names
CORE_KEY_FIELDS = frozenset({"identity", "prompt", "messages", "sample", "temperature", "top_p", "seed", "max_tokens"})


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters, all part of the cache key. The seed sent for sample ``s`` is
    ``seed + s`` (``seed=None`` sends none), so samples can differ even at temperature 0."""

    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = 0
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "top_p", None if self.top_p is None else float(self.top_p))
        object.__setattr__(self, "seed", None if self.seed is None else int(self.seed))
        object.__setattr__(self, "max_tokens", int(self.max_tokens))

    def for_sample(self, sample: int) -> Decoding:
        """The parameters sent for sample ``sample`` (the seed moved on by ``sample``)."""
        return dataclasses.replace(self, seed=None if self.seed is None else self.seed + int(sample))

    def key_fields(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class Completion:
    """What a transport got for one request.

    ``text``: the reply (None: no content); ``data``: a structured answer instead of text (a
    transport whose backend returns JSON objects, or computes the answer); ``truncated``: the
    reply was cut off (e.g. ``finish_reason == "length"``); ``usage``: tokens the backend reported;
    ``calls``: requests sent for it (retries included; 0 for a backend that sends none);
    ``key_fields``: when the transport changed something that is part of the key while answering
    (the OpenAI transport stepping down to another response format), the fields as they were
    when the answer was made; None means :meth:`Transport.key_fields` of the request.
    """

    text: str | None = None
    data: Mapping[str, Any] | None = None
    truncated: bool = False
    usage: Usage = field(default_factory=Usage)
    calls: int = 1
    key_fields: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class CompletionRequest:
    """One request for a transport: the prompt, the task's raw ``inputs``, the rendered
    ``messages``, the ``decoding`` parameters for this sample, and the ``sample`` index.
    ``repair`` is the completion being repaired (then ``messages`` end with the bad reply and
    the repair turn); a transport sends a repair with the same settings as that completion."""

    prompt: Prompt
    inputs: Mapping[str, Any]
    messages: list[dict[str, str]]
    decoding: Decoding
    sample: int = 0
    repair: Completion | None = None

    @property
    def output(self) -> type:
        """The pydantic model the answer must validate against."""
        return self.prompt.output

    @property
    def schema(self) -> dict[str, Any]:
        """The answer's strict JSON schema (OpenAI structured-output compatible)."""
        return self.prompt.schema

    @property
    def schema_name(self) -> str:
        return self.prompt.schema_name


@runtime_checkable
class Transport(Protocol):
    """A judge backend: sends one request, returns the reply. Raise
    :class:`~judge_eval.errors.JudgeCallError` (``cause`` machine-readable, ``calls`` and ``usage``
    what the failed request spent) when it cannot answer; anything else is a bug.

    Optional members the core uses when present: ``key_fields(request) -> dict`` (what else
    changes the answer, e.g. the model name: part of the cache key; default none),
    ``scrub(text) -> str`` (removes secrets from error text), ``async aclose()``.
    """

    #: who answers, recorded in results and hashed into cache keys; never a secret
    identity: str

    async def complete(self, request: CompletionRequest) -> Completion: ...


def repair_text(bad: InvalidOutput, messages: list[dict[str, str]]) -> str:
    """The user turn of the repair request: the error, and the task again (the last user turn)."""
    task = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    hint = " Keep it short: shorter quotes and reason." if bad.truncated else ""
    return (
        f"Your previous reply could not be used: {bad.message}.{hint}\n"
        "Reply again with only the corrected JSON object, nothing else, for the same task:\n\n"
        f"{task}"
    )


@functools.cache
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _share(usage: Usage, n: int) -> Usage:
    """``usage`` split evenly over ``n`` answers (what each stored verdict cost; rounded down)."""
    if n <= 1:
        return usage
    return Usage(usage.prompt_tokens // n, usage.completion_tokens // n, usage.reasoning_tokens // n,
                 usage.cached_tokens // n)


def _same_fields(stored: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    """Whether the key request ``stored`` carries exactly the transport fields ``fields``."""
    extra = set(stored) - CORE_KEY_FIELDS
    return extra == set(fields) and all(stored[k] == v for k, v in fields.items())


@dataclass
class _Spent:
    calls: int = 0
    usage: Usage = field(default_factory=Usage)


class JudgeCore:
    """A :class:`~judge_eval.judge.protocol.Judge` made of a :class:`Transport` plus the shared
    path (module docstring).

    ``cache``: a :class:`ResponseCache` (None: no caching). ``prompts``: the prompt of each task
    (:func:`~judge_eval.judge.prompts.select_prompts`; default versions unless selected).
    ``decoding``: :class:`Decoding`. ``namespace``: replaces the transport's identity in results and
    keys (two endpoints serving the same model can share answers under one name).
    """

    approximate: bool = False

    def __init__(
        self,
        transport: Transport,
        *,
        cache: ResponseCache | None = None,
        prompts: PromptSelection = None,
        decoding: Decoding | None = None,
        namespace: str | None = None,
    ) -> None:
        self.transport = transport
        self.cache = cache
        self.prompts: dict[str, Prompt] = select_prompts(prompts)
        self.decoding = decoding if decoding is not None else Decoding()
        self.namespace = namespace
        self.identity: str = namespace or transport.identity
        #: keys batch mode answered in this process (judge_eval.judge.batch: the batch, or its
        #: probe): their first use is reported as neither a call nor a cache hit (batch mode
        #: accounts for them)
        self.batch_answered: set[str] = set()
        #: whether the cache holds listwise answers (None: not looked yet; True once we store one)
        self._listwise_rows: bool | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(identity={self.identity!r}, transport={self.transport!r})"

    # -- the Judge protocol -------------------------------------------------------------------

    async def decompose(self, reference: str, *, sample: int = 0) -> JudgeResponse[Statements]:
        """Statements of ``reference`` (prompt ``decompose``)."""
        return await self.ask("decompose", sample, reference=reference)

    async def judge_chunk(
        self, question: str, statements: list[str], chunk: str, *, sample: int = 0
    ) -> JudgeResponse[ChunkVerdict]:
        """Verdict on ``chunk`` for ``question`` and its numbered ``statements`` (prompt
        ``judge_chunk``; a claim naming a statement outside ``1..len(statements)`` is invalid)."""
        return await self.ask("judge_chunk", sample, question=question, statements=list(statements), chunk=chunk)

    async def judge_chunks(
        self, question: str, statements: list[str], chunks: list[str], *, sample: int = 0
    ) -> list[JudgeResponse[ChunkVerdict]]:
        """Verdicts on several ``chunks`` of one question, in order, asking for up to all of them
        in one call (prompt ``judge_chunks``: listwise judging). Each chunk's verdict is looked up
        and stored on its own (:meth:`listwise_key`; a pointwise answer of the chunk counts too),
        so the answers and the cache are the same whatever the number of chunks per call. A chunk
        the answer leaves out, or whose verdict is invalid (a statement number out of range),
        is judged alone (:meth:`judge_chunk`); so is everything when the listwise answer stays
        invalid after its repair. A transport error (timeout, HTTP error) is raised for all.

        The calls and tokens of the listwise request are reported on the first chunk it answered
        (or on the first chunk judged alone, when it answered none); the others report 0."""
        statements = list(statements)
        chunks = list(chunks)
        if len(chunks) <= 1 or not getattr(self.transport, "listwise", False):
            return [await self.judge_chunk(question, statements, c, sample=sample) for c in chunks]
        prompt = self.listwise_prompt()
        out: dict[int, JudgeResponse[ChunkVerdict]] = {}
        pending: list[int] = []
        for i, chunk in enumerate(chunks):
            hit = self._cached_verdict(question, statements, chunk, sample)
            if hit is not None:
                out[i] = hit
            else:
                pending.append(i)
        if len(pending) == 1:
            i = pending[0]
            out[i] = await self.judge_chunk(question, statements, chunks[i], sample=sample)
        elif pending:
            inputs = {"question": question, "statements": statements, "chunks": [chunks[i] for i in pending]}
            request = self.request(prompt, inputs, sample)
            spent = _Spent()
            got: dict[int, ChunkVerdict] = {}
            fields: Mapping[str, Any] | None = None
            try:
                value, fields = await self._answer_listwise(request, spent)
            except JudgeCallError as exc:
                if exc.cause not in ("invalid_output", "truncated"):
                    raise
                value = None  # judged chunk by chunk below; what it spent is reported there
            for item in value.verdicts if value is not None else []:
                if not 1 <= item.chunk <= len(pending) or item.chunk in got:
                    continue
                verdict = item.verdict()
                try:
                    self.prompts["judge_chunk"].check(verdict, {"statements": statements, "chunk": ""})
                except InvalidOutput:
                    continue  # judged alone below
                got[item.chunk] = verdict
            share = _share(spent.usage, len(got))
            if self.cache is not None and got:
                fields = fields if fields is not None else self.key_fields(request)
                self._listwise_rows = True
                for n, verdict in got.items():
                    stored = self._listwise_key_request(request, chunks[pending[n - 1]], fields)
                    self.cache.put(cache_key(stored), identity=self.identity, prompt=prompt.id, request=stored,
                                   response=verdict.model_dump(mode="json"), usage=share)
            owed = spent
            for n, i in enumerate(pending, start=1):
                if n in got:
                    out[i] = JudgeResponse(value=got[n], calls=owed.calls, cache_hit=False, usage=owed.usage)
                    owed = _Spent()
            for n, i in enumerate(pending, start=1):
                if n not in got:
                    alone = await self.judge_chunk(question, statements, chunks[i], sample=sample)
                    alone.calls += owed.calls
                    alone.usage = alone.usage + owed.usage
                    out[i], owed = alone, _Spent()
        return [out[i] for i in range(len(chunks))]

    async def aclose(self) -> None:
        """Close the transport (when it has anything to close)."""
        close = getattr(self.transport, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> JudgeCore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- keys ---------------------------------------------------------------------------------

    def request(self, prompt: Prompt, inputs: Mapping[str, Any], sample: int = 0) -> CompletionRequest:
        """The first-choice request of a task (rendered messages, decoding for this sample)."""
        return CompletionRequest(
            prompt=prompt,
            inputs=dict(inputs),
            messages=prompt.render(**inputs),
            decoding=self.decoding.for_sample(sample),
            sample=int(sample),
        )

    def key_fields(self, request: CompletionRequest) -> dict[str, Any]:
        """What the transport adds to the key (its optional ``key_fields``; none by default)."""
        fields = getattr(self.transport, "key_fields", None)
        return dict(fields(request)) if fields is not None else {}

    def key_request(self, request: CompletionRequest, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The dictionary hashed into the cache key and stored as the row's ``request``: identity,
        prompt id, messages, decoding parameters, sample index and the transport's ``fields``
        (default: :meth:`key_fields`). Never a credential."""
        return self._key_request(request, {"messages": request.messages}, fields)

    def _key_request(
        self, request: CompletionRequest, content: Mapping[str, Any], fields: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Identity, prompt id, what was asked (``content``), decoding, sample, transport fields."""
        fields = self.key_fields(request) if fields is None else fields
        clash = CORE_KEY_FIELDS & set(fields)
        if clash:
            raise ValueError(f"transport key_fields may not set {sorted(clash)}")
        return {
            "identity": self.identity,
            "prompt": request.prompt.id,
            **content,
            **request.decoding.key_fields(),
            "sample": request.sample,
            **fields,
        }

    def cached_chunks(
        self, question: str, statements: list[str], chunks: list[str], sample: int = 0
    ) -> list[JudgeResponse[ChunkVerdict] | None]:
        """Each chunk's verdict from the cache (listwise or pointwise), as a hit, or None: what
        the runner need not ask, so it groups only the others into listwise calls."""
        return [self._cached_verdict(question, list(statements), c, sample) for c in chunks]

    def listwise_prompt(self) -> Prompt:
        """The ``judge_chunks`` prompt: the selected version, else the default."""
        return self.prompts.get("judge_chunks") or load_prompt("judge_chunks")

    def _listwise_key_request(
        self, request: CompletionRequest, chunk: str, fields: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The key request of one chunk's verdict from a listwise ``request``: what
        :meth:`key_request` holds, with the chunk's inputs (``item``: question, statements,
        chunk) and a digest of the template instead of the rendered messages, so it does not
        depend on the other chunks of the call nor on how many there were."""
        item = {"question": request.inputs["question"], "statements": list(request.inputs["statements"]),
                "chunk": chunk}
        return self._key_request(request, {"template": _digest(request.prompt.template), "item": item}, fields)

    def listwise_key(self, question: str, statements: list[str], chunk: str, sample: int = 0) -> str:
        """The cache key of ``chunk``'s verdict when it is judged listwise (any batch size)."""
        inputs = {"question": question, "statements": list(statements), "chunks": [chunk]}
        request = CompletionRequest(self.listwise_prompt(), inputs, [], self.decoding.for_sample(sample), int(sample))
        return cache_key(self._listwise_key_request(request, chunk))

    def _found(self, key: str, inputs: Mapping[str, Any]) -> JudgeResponse[ChunkVerdict] | None:
        """The chunk verdict stored under ``key`` that still validates for ``inputs``, as a hit."""
        assert self.cache is not None
        values: dict[str, Any] = {}

        def usable(entry: CacheEntry) -> bool:
            try:
                values[entry.key] = self.prompts["judge_chunk"].validate(entry.response, inputs)
            except InvalidOutput:
                return False
            return True

        entry = self.cache.find(key, accept=usable)
        if entry is None:
            return None
        return JudgeResponse(value=values[entry.key], calls=0, cache_hit=True, saved_usage=entry.usage)

    def _listwise_rows_exist(self) -> bool:
        """Whether the cache may hold listwise answers of this judge's listwise prompt (looked up
        once; True from the first one stored)."""
        if self.cache is None or self.cache.mode == "off" or not getattr(self.transport, "listwise", False):
            return False
        if self._listwise_rows is None:
            self._listwise_rows = self.cache.has_prompt(self.listwise_prompt().id)
        return self._listwise_rows

    def _listwise_hit(self, question: str, statements: list[str], chunk: str, sample: int) -> Any:
        """A listwise verdict of ``chunk`` in the cache, as a hit; None when there is none (or
        the transport does not judge listwise)."""
        if self.cache is None or not self._listwise_rows_exist():
            return None
        inputs = {"question": question, "statements": list(statements), "chunk": chunk}
        return self._found(self.listwise_key(question, statements, chunk, sample), inputs)

    def _cached_verdict(self, question: str, statements: list[str], chunk: str, sample: int) -> Any:
        """``chunk``'s verdict from the cache, listwise or pointwise, as a hit; else None."""
        if self.cache is None:
            return None
        hit = self._listwise_hit(question, statements, chunk, sample)
        if hit is not None:
            return hit
        request = self.request(self.prompts["judge_chunk"], {"question": question, "statements": list(statements),
                                                             "chunk": chunk}, sample)
        return self._found(cache_key(self.key_request(request)), request.inputs)

    async def _answer_listwise(
        self, request: CompletionRequest, spent: _Spent
    ) -> tuple[ChunkVerdicts, Mapping[str, Any] | None]:
        """A listwise answer (one repair when it is not valid JSON of the schema) and the key
        fields it was made with; nothing is stored here."""
        value, first = await self._valid(request, spent)
        return value, first.key_fields

    # -- the path -----------------------------------------------------------------------------

    async def ask(self, task: str, sample: int = 0, **inputs: Any) -> JudgeResponse[Any]:
        """Answer one task (``decompose``, ``judge_chunk``) with the selected prompt."""
        prompt = self.prompts[task]
        request = self.request(prompt, inputs, sample)
        claim: Claim | None = None
        looked_up: tuple[dict[str, Any], str] | None = None
        if self.cache is not None:
            asked = self.key_request(request)
            key = cache_key(asked)
            looked_up = (asked, key)
            if task == "judge_chunk" and self._listwise_rows_exist() and self.cache.peek(key) is None:
                # not answered alone: answered in a listwise call? (only when the cache has such rows)
                hit = self._listwise_hit(inputs["question"], inputs["statements"], inputs["chunk"], sample)
                if hit is not None:
                    return hit
            values: dict[str, Any] = {}

            def usable(entry: CacheEntry) -> bool:
                try:
                    values[entry.key] = prompt.validate(entry.response, request.inputs)
                except InvalidOutput:
                    return False  # a row that no longer validates is a miss
                return True

            # a hit, or our claim on the key (waiting while another process asks for it)
            got = await self.cache.acquire(key, accept=usable)
            if isinstance(got, CacheEntry):
                if got.key in self.batch_answered:
                    self.batch_answered.discard(got.key)
                    return JudgeResponse(value=values[got.key], calls=0, cache_hit=False)
                return JudgeResponse(value=values[got.key], calls=0, cache_hit=True, saved_usage=got.usage)
            claim = got
            if self.cache.mode == "replay":
                raise JudgeCallError(
                    "cache_miss",
                    f"{prompt.id} via {self.identity}: no cached answer (key {key[:16]}) and the cache is "
                    "in replay mode, which sends no requests",
                )
        spent = _Spent()
        async with claim if claim is not None else contextlib.nullcontext():
            return await self._answer(request, spent, looked_up)

    async def _complete(self, request: CompletionRequest, spent: _Spent) -> Completion:
        """One transport call; what it spent is added to ``spent``, also when it fails (the
        error then carries the whole task's calls and tokens)."""
        try:
            completion = await self.transport.complete(request)
        except JudgeCallError as exc:
            spent.calls += int(exc.calls or 0)
            spent.usage = spent.usage + (exc.usage if isinstance(exc.usage, Usage) else Usage())
            exc.calls, exc.usage = spent.calls, spent.usage
            raise
        spent.calls += completion.calls
        spent.usage = spent.usage + completion.usage
        return completion

    @staticmethod
    def _value(request: CompletionRequest, completion: Completion) -> Any:
        if completion.data is not None and not completion.truncated:
            return request.prompt.validate(completion.data, request.inputs)
        return request.prompt.parse_answer(completion.text, request.inputs, truncated=completion.truncated)

    async def _valid(self, request: CompletionRequest, spent: _Spent) -> tuple[Any, Completion]:
        """A valid answer to ``request`` (one repair on an invalid one) and the first completion
        (whose key fields the answer is stored under)."""
        first = await self._complete(request, spent)
        try:
            return self._value(request, first), first
        except InvalidOutput as bad:
            repair = [
                *request.messages,
                {"role": "assistant", "content": first.text or ""},
                {"role": "user", "content": repair_text(bad, request.messages)},
            ]
            second = await self._complete(dataclasses.replace(request, messages=repair, repair=first), spent)
            try:
                return self._value(request, second), first
            except InvalidOutput as still:
                scrub = getattr(self.transport, "scrub", None)
                message = scrub(still.message) if scrub is not None else still.message
                raise JudgeCallError(
                    "truncated" if still.truncated else "invalid_output",
                    f"{request.prompt.id} via {self.identity}: invalid answer after one repair: {message}",
                    calls=spent.calls,
                    usage=spent.usage,
                ) from None

    async def _answer(
        self, request: CompletionRequest, spent: _Spent, looked_up: tuple[dict[str, Any], str] | None = None
    ) -> JudgeResponse[Any]:
        """Ask the transport (one repair on an invalid answer) and cache the valid answer.
        ``looked_up``: the key request and key the cache was searched under; the answer is stored
        under them unless the transport answered with other key fields (another format)."""
        prompt = request.prompt
        value, first = await self._valid(request, spent)

        if self.cache is not None:
            fields = first.key_fields if first.key_fields is not None else self.key_fields(request)
            stored, key = looked_up if looked_up is not None else ({}, "")
            if not key or not _same_fields(stored, fields):
                stored = self.key_request(request, fields)
                key = cache_key(stored)
            self.cache.put(
                key,
                identity=self.identity,
                prompt=prompt.id,
                request=stored,
                response=value.model_dump(mode="json"),
                usage=spent.usage,
            )
        return JudgeResponse(value=value, calls=spent.calls, cache_hit=False, usage=spent.usage)
