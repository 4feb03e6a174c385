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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from judge_eval.cache import CacheEntry, Claim, ResponseCache, cache_key
from judge_eval.errors import JudgeCallError
from judge_eval.judge.parsing import InvalidOutput
from judge_eval.judge.prompts import Prompt, PromptSelection, select_prompts
from judge_eval.judge.protocol import ChunkVerdict, JudgeResponse, Statements
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
        fields = self.key_fields(request) if fields is None else fields
        clash = CORE_KEY_FIELDS & set(fields)
        if clash:
            raise ValueError(f"transport key_fields may not set {sorted(clash)}")
        return {
            "identity": self.identity,
            "prompt": request.prompt.id,
            "messages": request.messages,
            **request.decoding.key_fields(),
            "sample": request.sample,
            **fields,
        }

    # -- the path -----------------------------------------------------------------------------

    async def ask(self, task: str, sample: int = 0, **inputs: Any) -> JudgeResponse[Any]:
        """Answer one task (``decompose``, ``judge_chunk``) with the selected prompt."""
        prompt = self.prompts[task]
        request = self.request(prompt, inputs, sample)
        claim: Claim | None = None
        if self.cache is not None:
            key = cache_key(self.key_request(request))
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
            return await self._answer(request, spent)

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

    async def _answer(self, request: CompletionRequest, spent: _Spent) -> JudgeResponse[Any]:
        """Ask the transport (one repair on an invalid answer) and cache the valid answer."""
        prompt = request.prompt
        first = await self._complete(request, spent)
        try:
            value = self._value(request, first)
        except InvalidOutput as bad:
            repair = [
                *request.messages,
                {"role": "assistant", "content": first.text or ""},
                {"role": "user", "content": repair_text(bad, request.messages)},
            ]
            second = await self._complete(dataclasses.replace(request, messages=repair, repair=first), spent)
            try:
                value = self._value(request, second)
            except InvalidOutput as still:
                scrub = getattr(self.transport, "scrub", None)
                message = scrub(still.message) if scrub is not None else still.message
                raise JudgeCallError(
                    "truncated" if still.truncated else "invalid_output",
                    f"{prompt.id} via {self.identity}: invalid answer after one repair: {message}",
                    calls=spent.calls,
                    usage=spent.usage,
                ) from None

        if self.cache is not None:
            fields = first.key_fields if first.key_fields is not None else self.key_fields(request)
            stored = self.key_request(request, fields)
            self.cache.put(
                cache_key(stored),
                identity=self.identity,
                prompt=prompt.id,
                request=stored,
                response=value.model_dump(mode="json"),
                usage=spent.usage,
            )
        return JudgeResponse(value=value, calls=spent.calls, cache_hit=False, usage=spent.usage)
