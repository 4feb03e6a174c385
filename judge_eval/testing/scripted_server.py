"""A scripted OpenAI-compatible chat-completions server for tests (nothing beyond judge-eval's own dependencies).

It listens on 127.0.0.1 in a background thread and answers judge_eval's two prompts
(``decompose`` and ``judge_chunk``, every shipped version, see ``prompts/``) from a :class:`Scenario`
table, so the judge client is exercised through the real ``openai`` client and real HTTP::

    scenario = Scenario(
        decompositions={"Paris is the capital. It has 2M people.": ["Paris is the capital.",
                                                                     "Paris has 2M people."]},
        verdicts={"Paris, capital of France, has 2M people.":
                  ChunkScript(supports=["Paris has 2M people."], grade=2)},
    )
    with ScriptedServer(scenario, faults=[Fault("429", share=0.3, retry_after=0.05)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        ...
        assert server.completions == 2

Endpoints
---------
``POST /v1/chat/completions`` (also ``/chat/completions`` and Azure's
``/openai/deployments/<name>/chat/completions``; the log records ``query`` and ``deployment``)
and ``GET /v1/models`` (also ``/models``). The files and batches endpoints (``POST /v1/files``,
``GET /v1/files/{id}[/content]``, ``POST /v1/batches``, ``GET /v1/batches[/{id}]``,
``POST /v1/batches/{id}/cancel``; also under ``/openai/``) run a batch's lines through the same
answers at its polls (see :meth:`ScriptedServer._poll_batch`); :meth:`ScriptedServer.run_batch_file`
answers a request file offline as ``vllm run-batch`` does. Answers have the exact OpenAI shape;
token counts are estimated as ``ceil(chars / 4)`` (prompt: the characters of all message
contents; completion: of the answer content).

Recognising prompts
-------------------
The prompt objects that render the messages also recognise them
(:func:`judge_eval.judge.prompts.recognise`, which tries every shipped version of every prompt,
:meth:`~judge_eval.judge.prompts.Prompt.parse`): the first two messages (system, user) must be a
rendering of one of them; later turns (a repair) continue the same task. So every shipped version
(``judge_chunk@1``, ``judge_chunk@2`` ...) is answered, and the log says which (``prompt``).

* ``decompose`` -> answer ``{"statements": [...]}``. The reference is looked up in
  ``Scenario.decompositions`` (keys compared after
  :func:`judge_eval.judge.prompts.quote_data`, surrounding whitespace ignored); an unknown
  reference is split at sentence ends (``.``, ``!``, ``?`` followed by whitespace).
* ``judge_chunk`` -> answer ``{"supports": [{"statement": n, "evidence": quote}],
  "grade": g, "reason": "..."}``. The chunk is looked up in ``Scenario.verdicts``; the script
  names supported statements by TEXT and the server maps them to the numbers used in this
  prompt (script statements absent from the prompt are ignored; a text present twice yields
  both numbers). Unknown chunks: no support, ``Scenario.default_grade``.
* anything else -> HTTP 400 (OpenAI error shape).

Output modes (``response_format``)
----------------------------------
* ``{"type": "json_schema", ...}`` -> plain JSON content; with ``refuse_json_schema=True``
  the server rejects it like llama.cpp's server rejects a schema it cannot convert to a
  grammar (see :data:`LLAMACPP_SCHEMA_REFUSAL`).
* ``{"type": "json_object"}`` -> plain JSON content; with ``refuse_json_object=True`` a 400
  in the same llama.cpp shape, so a client has to fall back to text mode.
* no ``response_format`` (or ``{"type": "text"}``) -> prose around a ```json code fence; the
  client must extract the JSON.

Faults
------
Each :class:`Fault` selects a deterministic share of *distinct requests*: a request is
selected when ``sha256(server seed, fault seed, messages key)`` mapped to [0, 1) is below
``share`` (so the selected share is approximately ``share`` over many requests, exactly the
same set on every run, and two faults with equal seeds and shares select the same requests).

Attempts are counted per **full-body key** (:func:`body_key`: the canonical JSON of the whole
request body, nothing excluded). The openai client re-sends an identical body on retry, so a
retry is the next attempt of the same request; a body that differs in anything (another
``response_format`` after a refusal, another ``seed``/``temperature`` for a second sample, a
repair turn) is a new request whose attempts start again at 1.

For attempt ``n`` of a request, the faults that apply to it (selected, matching ``only``;
``invented_evidence`` applies to judge_chunk only) are laid out one after the other in list
order, each over ``times`` attempts: with ``[Fault("429", times=2), Fault("500")]`` attempts
1-2 get 429, attempt 3 gets 500, attempt 4 succeeds. ``times=10**9`` never lets it succeed.

Kinds: ``"429"`` (with a ``Retry-After`` header in seconds, possibly fractional, when
``retry_after`` is given), ``"500"``, ``"503"``, ``"400"``, ``"401"``, ``"hang"`` (wait
``hang_seconds`` before answering normally; interrupted and unanswered at shutdown, and not
answered when the client has gone), ``"drop"`` (close the connection without any response),
``"malformed"`` (200, content that is not JSON), ``"truncated"`` (200, the normal content cut
in half, ``finish_reason="length"``), ``"wrong_schema"`` (200, valid JSON of the wrong shape:
``{"answer": "yes"}``), ``"invented_evidence"`` (200, the judge_chunk answer with one extra support claim in front,
quoting ``"the moon is made of cheese"``, for the first statement the chunk does not support,
or statement 1 when it supports all: a client that counted it would overstate support).

Accounting
----------
``requests`` logs every chat request (dicts with ``body``, ``headers`` (lower-cased),
``fault``, ``status`` (``None`` when no response was sent), plus ``path``, ``kind``
(``"decompose"``/``"judge_chunk"``/``None``), ``prompt`` (the prompt id, e.g.
``"judge_chunk@1"``, or ``None``), ``key`` (messages key), ``attempt``).
``completions`` and ``served_keys`` count only clean answers: status 200 without a fault.
``usage`` sums the token counts of every 200 answer (faulty ones included), as a client that
adds up ``response.usage`` would see them. All counters are guarded by one lock.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import json
import math
import re
import select
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from judge_eval.cache import canonical_json
from judge_eval.judge.prompts import quote_data, recognise

FAULT_KINDS = frozenset(
    {
        "429",
        "500",
        "503",
        "400",
        "401",
        "hang",
        "drop",
        "malformed",
        "truncated",
        "wrong_schema",
        "invented_evidence",
    }
)

#: The parameters a reasoning model refuses, in the order it names them (one per 400)
REASONING_REFUSES = ("max_tokens", "temperature", "top_p")

#: What a batch does once it is polled (see :meth:`ScriptedServer._poll_batch`)
BATCH_OUTCOMES = ("complete", "expire", "fail")

#: Evidence quoted by the ``invented_evidence`` fault; never a substring of a sane chunk.
INVENTED_EVIDENCE = "the moon is made of cheese"

#: Content of the ``malformed`` fault: no valid JSON value can be extracted from it.
MALFORMED_CONTENT = '{"statements": [oops, this is not JSON'

#: Content (as JSON) of the ``wrong_schema`` fault.
WRONG_SCHEMA_ANSWER = {"answer": "yes"}

#: How llama.cpp's server (``llama-server``) refuses a ``json_schema`` response_format that it
#: cannot turn into a grammar. Since ggml-org/llama.cpp PR #17572 ("Server: Change Invalid
#: Schema from Server Error (500) to User Error (400)", merged 2025-11) the status is 400 and
#: the body is ``{"error": {"code": 400, "message": "JSON schema conversion failed:\n...",
#: "type": "invalid_request_error"}}``: ``format_error_response`` in
#: tools/server/server-common.cpp maps ERROR_TYPE_INVALID_REQUEST to code 400 /
#: "invalid_request_error", and a logged real body is quoted in browseros-ai/BrowserOS issue
#: #255: ``{"error":{"code":400,"message":"JSON schema conversion failed:\nUnrecognized schema:
#: {\"description\":\"Arguments for the tool (JSON object)\"}","type":"invalid_request_error"}}``.
#: (Older builds answered the same shape with code 500 / "server_error".)
LLAMACPP_SCHEMA_REFUSAL = "JSON schema conversion failed:\nUnrecognized schema: {schema}"

#: Message of the json_object refusal (same llama.cpp shape; modelled on llama.cpp's
#: ``response_format type must be one of "text" or "json_object", but got: ...``).
JSON_OBJECT_REFUSAL = 'response_format type must be one of "text" or "json_schema", but got: json_object'


def messages_key(messages: Any) -> str:
    """Canonical key of a request's ``messages``: sha256 hex of their canonical JSON (sorted
    keys, no whitespace). Keys of :attr:`ScriptedServer.served_keys`; selects faults."""
    return hashlib.sha256(canonical_json(messages).encode("utf-8")).hexdigest()


def body_key(body: Any) -> str:
    """Canonical key of a whole request body (nothing excluded): attempts are counted per
    this key, so an identical re-sent body is the next attempt of the same request."""
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def estimate_tokens(chars: int) -> int:
    """Token estimate used in ``usage``: ``ceil(chars / 4)``."""
    return math.ceil(chars / 4)


@dataclass
class ChunkScript:
    """How the scripted judge answers for one chunk.

    ``supports``: statement TEXTS the chunk supports (mapped to the prompt's numbers).
    ``grade``: 0..3. ``evidence``: statement text -> quote; a statement without an entry gets
    :func:`default_evidence` (a verbatim sentence of the chunk).
    """

    supports: list[str] = field(default_factory=list)
    grade: int = 0
    evidence: dict[str, str] | None = None


@dataclass
class Scenario:
    """What the scripted judge knows: reference -> statements, chunk text -> verdict."""

    decompositions: dict[str, list[str]] = field(default_factory=dict)
    verdicts: dict[str, ChunkScript] = field(default_factory=dict)
    default_grade: int = 0


@dataclass
class Fault:
    """A fault injected into a deterministic share of requests (see module docstring).

    kind: one of :data:`FAULT_KINDS`. share: fraction of distinct requests selected (by hash
    of the messages, ``seed`` and the server's seed). times: how many attempts of a selected
    request get the fault. retry_after: seconds for the ``Retry-After`` header of a 429.
    only: restrict to ``"decompose"`` or ``"judge_chunk"`` requests. hang_seconds: how long
    a ``hang`` waits before answering.
    """

    kind: str
    share: float = 1.0
    times: int = 1
    retry_after: float | None = None
    seed: int = 0
    only: str | None = None
    hang_seconds: float = 30.0

    def __post_init__(self) -> None:
        self.kind = str(self.kind)
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {sorted(FAULT_KINDS)}")
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"fault share must be in [0, 1], got {self.share}")
        if self.times < 0:
            raise ValueError(f"fault times must be >= 0, got {self.times}")
        if self.only not in (None, "decompose", "judge_chunk"):
            raise ValueError(f"fault only= must be None, 'decompose' or 'judge_chunk', got {self.only!r}")

    def selects(self, key: str, server_seed: int = 0) -> bool:
        """Whether this fault selects the request with messages key ``key``:
        ``u = first 8 bytes of sha256(f"{server_seed}:{seed}:{key}") / 2**64`` and
        ``u < share`` (share 1 selects all, share 0 none)."""
        if self.share >= 1.0:
            return True
        if self.share <= 0.0:
            return False
        digest = hashlib.sha256(f"{server_seed}:{self.seed}:{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2.0**64 < self.share

    def applies_to(self, kind: str | None) -> bool:
        """Whether this fault can hit a request of prompt kind ``kind``."""
        if self.kind == "invented_evidence" and kind != "judge_chunk":
            return False
        return self.only is None or self.only == kind


# --------------------------------------------------------------------------------------
# Prompt parsing and scripted answers
# --------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split after ``.``, ``!`` or ``?`` followed by whitespace, and at
    line breaks; stripped, empty pieces dropped."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(p.strip() for p in _SENTENCE_END.split(line) if p.strip())
    return out


def default_evidence(chunk: str, statement: str) -> str:
    """A verbatim quote of ``chunk`` for ``statement``: among the chunk's sentences and their
    clauses (split at ``,``/``;``/``:``), the one sharing most distinct lower-cased words with
    the statement; ties go to the longer piece, then the earlier one. Always a substring of
    ``chunk`` (the stripped chunk itself when it has no words)."""
    words = set(_WORD.findall(statement.lower()))
    candidates: list[str] = []
    for sentence in split_sentences(chunk):
        candidates.append(sentence)
        candidates.extend(p.strip() for p in re.split(r"[,;:]\s", sentence) if p.strip())
    best, best_score = chunk.strip(), (-1, -1)
    for piece in candidates:
        score = (len(words & set(_WORD.findall(piece.lower()))), len(piece))
        if score > best_score:
            best, best_score = piece, score
    return best


@dataclass
class _Parsed:
    kind: str  # the prompt's name: "decompose" | "judge_chunk"
    prompt: str  # its id, e.g. "judge_chunk@2"
    inputs: dict[str, Any] = field(default_factory=dict)  # what the prompt was rendered from


def parse_prompt(messages: Any) -> _Parsed | None:
    """Recognise judge_eval's prompts (any shipped version) through the prompt objects that
    render them (:func:`judge_eval.judge.prompts.recognise`); ``None`` if unknown."""
    found = recognise(messages)
    if found is None:
        return None
    prompt, inputs = found
    return _Parsed(prompt.name, prompt.id, inputs)


class _Script:
    """Scenario tables keyed the way the data appears inside the prompts."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.references = {
            quote_data(k, "reference").strip(): list(v) for k, v in scenario.decompositions.items()
        }
        self.chunks = {
            quote_data(k, "chunk").strip(): (k, v) for k, v in scenario.verdicts.items()
        }

    def decompose(self, p: _Parsed) -> dict[str, Any]:
        reference = p.inputs["reference"]
        key = quote_data(reference, "reference").strip()
        if key in self.references:
            return {"statements": list(self.references[key])}
        return {"statements": split_sentences(reference)}

    def judge_chunks(self, p: _Parsed, omit: Iterable[str] = ()) -> dict[str, Any]:
        """A listwise answer: the verdict of each chunk as :meth:`judge_chunk` gives it, numbered
        as in the prompt; chunks whose text is in ``omit`` are left out."""
        left_out = {c.strip() for c in omit}
        verdicts = []
        for n, chunk in enumerate(p.inputs["chunks"], start=1):
            if chunk.strip() in left_out:
                continue
            one = _Parsed("judge_chunk", p.prompt, {**p.inputs, "chunk": chunk})
            verdicts.append({"chunk": n, **self.judge_chunk(one)})
        return {"verdicts": verdicts}

    def judge_chunk(self, p: _Parsed) -> dict[str, Any]:
        found = self.chunks.get(quote_data(p.inputs["chunk"], "chunk").strip())
        if found is None:
            grade = self.scenario.default_grade
            return {"supports": [], "grade": grade, "reason": f"scripted: unknown chunk, grade {grade}"}
        chunk_text, script = found
        evidence = script.evidence or {}
        wanted = {s.strip(): s for s in script.supports}
        supports = []
        for n, text in enumerate(p.inputs["statements"], start=1):
            original = wanted.get(text.strip())
            if original is None:
                continue
            quote = evidence.get(original)
            if quote is None:
                quote = default_evidence(chunk_text, original)
            supports.append({"statement": n, "evidence": quote})
        numbers = [s["statement"] for s in supports]
        return {
            "supports": supports,
            "grade": script.grade,
            "reason": f"scripted: supports statements {numbers}" if numbers else "scripted: supports no statement",
        }


# --------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    # socketserver's default backlog is 5: a client opening 32 connections at once has most of
    # its SYNs dropped and retried a second later, which looks like a slow client
    request_queue_size = 256
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (killed, timed out) is not an error of the server."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "judge-eval-scripted/1"
    server: _HTTPServer
    _headers_buffer: list[bytes]  # BaseHTTPRequestHandler's own, written directly below

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def setup(self) -> None:
        super().setup()
        try:  # one write per response, no Nagle/delayed-ACK stalls (~40 ms per request)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.owner._track(self.connection, add=False)

    # -- helpers -------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> bool:
        """Send a JSON response; False when the client is gone (nothing or not all sent)."""
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            # end_headers() without its flush: headers and body leave in a single write
            self._headers_buffer.append(b"\r\n")
            self.wfile.write(b"".join(self._headers_buffer) + data)
            self._headers_buffer = []
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            return False

    def _peer_gone(self) -> bool:
        """True when the client closed its end (readable with EOF)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- routes --------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        if _route(path).startswith(("/v1/files", "/v1/batches")):
            owner._handle_api(self, "GET", b"")
            return
        if path in ("/v1/models", "/models"):
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": owner.model, "object": "model", "created": owner.created, "owned_by": "judge-eval"}
                    ],
                },
            )
        else:
            self._send_json(404, _openai_error(f"Unknown path {path}", "invalid_request_error", None))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if _route(path) == "/v1/chat/completions":
            self.server.owner._handle_chat(self, path, raw)
            return
        self.server.owner._handle_api(self, "POST", raw)

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def do_PUT(self) -> None:  # pragma: no cover - not part of the protocol
        self._send_json(405, _openai_error("Method not allowed", "invalid_request_error", None))


def _openai_error(message: str, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _llamacpp_error(message: str, code: int = 400, type_: str = "invalid_request_error") -> dict[str, Any]:
    """llama.cpp server's error body (tools/server/server-common.cpp, format_error_response)."""
    return {"error": {"code": code, "message": message, "type": type_}}


_STATUS_ERRORS = {
    "429": (429, "Rate limit reached for requests (scripted fault)", "requests", "rate_limit_exceeded"),
    "500": (500, "The server had an error while processing your request (scripted fault)", "server_error", None),
    "503": (503, "The engine is currently overloaded, please try again later (scripted fault)", "server_error", None),
    "400": (400, "Invalid request (scripted fault)", "invalid_request_error", None),
    "401": (401, "Incorrect API key provided (scripted fault)", "invalid_request_error", "invalid_api_key"),
}


class ScriptedServer:
    """The scripted server. Use as a context manager (or :meth:`start` / :meth:`close`).

    Parameters: ``scenario``; ``faults`` (list of :class:`Fault`); ``refuse_json_schema`` /
    ``refuse_json_object`` (400 for that ``response_format``, see module docstring);
    ``latency`` (seconds waited before every chat answer, interruptible by shutdown);
    ``seed`` (mixed into fault selection); ``model`` (reported model id); ``api_key`` (when
    given, requests without ``Authorization: Bearer <api_key>`` get a 401); ``port`` (0 = any
    free port); ``hold_after`` (answer only that many chat requests, then hold every further one
    unanswered until :meth:`release` or shutdown: lets a test kill a client at a known point).
    An ``api_key`` may also come as Azure's ``api-key`` header.

    Reasoning models: ``reasoning_model`` (refuse ``max_tokens``, a ``temperature`` or ``top_p``
    other than 1, one per 400 in OpenAI's words; a model that is not one refuses
    ``reasoning_effort``), ``refuse_params`` (refuse only these of them), ``reasoning_tokens``
    (reported in ``completion_tokens_details`` and added to ``completion_tokens``).

    Listwise judging (prompt ``judge_chunks``): every chunk is answered as ``judge_chunk`` would,
    except chunks whose text is in ``listwise_omit``, which the answer leaves out.
    ``prompt_cache``: report ``usage.prompt_tokens_details.cached_tokens`` as OpenAI's prompt
    caching would (a prefix of 1024 tokens or more, in 128-token steps, seen in an earlier request).

    Batches: ``batch_outcome`` (``complete``; ``expire``: the second half of the lines unfinished;
    ``fail``: the whole batch at validation), ``batch_hold`` (a batch stays ``in_progress`` until
    :meth:`release_batches`). ``batches``, ``files``, ``api_requests`` (every files/batches
    request), ``batch_served`` (messages key -> batch lines answered) and ``batch_usage`` count
    what batches did, apart from the chat counters.
    """

    def __init__(
        self,
        scenario: Scenario | None = None,
        faults: Iterable[Fault] = (),
        *,
        refuse_json_schema: bool = False,
        refuse_json_object: bool = False,
        latency: float = 0.0,
        seed: int = 0,
        model: str = "scripted-judge",
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        hold_after: int | None = None,
        reasoning_model: bool = False,
        reasoning_tokens: int = 0,
        refuse_params: Iterable[str] = (),
        batch_outcome: str = "complete",
        batch_hold: bool = False,
        listwise_omit: Iterable[str] = (),
        prompt_cache: bool = False,
    ) -> None:
        if batch_outcome not in BATCH_OUTCOMES:
            raise ValueError(f"batch_outcome must be one of {BATCH_OUTCOMES}, got {batch_outcome!r}")
        self.scenario = scenario if scenario is not None else Scenario()
        self.faults = list(faults)
        self.refuse_json_schema = refuse_json_schema
        self.refuse_json_object = refuse_json_object
        self.latency = latency
        self.seed = seed
        self.model = model
        self.api_key = api_key
        self.created = int(time.time())
        self._host = host
        self._port = port
        self._script = _Script(self.scenario)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.hold_after = hold_after
        self._answers_started = 0
        self.held = 0  # requests currently held by ``hold_after``
        self._released = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[dict[str, Any]] = []
        self.completions = 0
        self.served_keys: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()  # body key -> attempts received
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self.reasoning_model = reasoning_model
        self.reasoning_tokens = int(reasoning_tokens)
        self.refuse_params = tuple(refuse_params)
        unknown = set(self.refuse_params) - set(REASONING_REFUSES)
        if unknown:
            raise ValueError(f"refuse_params can name {REASONING_REFUSES}, not {sorted(unknown)}")
        # the files and batches endpoints
        self.batch_outcome = batch_outcome
        self.listwise_omit = tuple(listwise_omit)
        self.prompt_cache = prompt_cache
        self._prefixes: set[bytes] = set()
        self._prefix_lock = threading.Lock()
        self.cached_tokens = 0  # prompt tokens reported as cached (prompt_cache)
        self.batch_hold = batch_hold
        self._batches_released = threading.Event()
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.api_requests: list[dict[str, Any]] = []  # every files/batches request: method, path, query, headers
        self.batch_served: Counter[str] = Counter()  # messages key -> batch lines answered (status 200)
        self.batch_usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    # -- holding -------------------------------------------------------------------------

    def release(self) -> None:
        """Answer held requests (and every later one): ends ``hold_after``."""
        self._released.set()

    def _pass_hold(self) -> bool:
        """False when the server closed while this request was held."""
        with self._lock:
            if self.hold_after is None or self._released.is_set() or self._answers_started < self.hold_after:
                self._answers_started += 1
                return True
            self.held += 1
        try:
            while not self._released.wait(0.02):
                if self._closing.is_set():
                    return False
            return True
        finally:
            with self._lock:
                self.held -= 1

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self._closing.clear()
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving: wake sleeping handlers (hang/latency), stop the accept loop, close
        the listening socket and every open client connection. Never waits for handlers."""
        httpd = self._httpd
        if httpd is None:
            return
        self._closing.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the ``base_url`` for the openai client."""
        return f"http://{self._host}:{self.port}/v1"

    def reset_log(self) -> None:
        """Forget logged requests and all counters (attempts included)."""
        with self._lock:
            self.requests.clear()
            self.completions = 0
            self.served_keys.clear()
            self.attempts.clear()
            self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            self.cached_tokens = 0

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # -- queries -------------------------------------------------------------------------

    @staticmethod
    def key_for(messages: Any) -> str:
        """The :attr:`served_keys` key of ``messages`` (see :func:`messages_key`)."""
        return messages_key(messages)

    def fault_for(self, body: dict[str, Any], attempt: int) -> Fault | None:
        """The fault attempt ``attempt`` (1-based) of ``body`` gets (module docstring)."""
        parsed = parse_prompt(body.get("messages"))
        kind = parsed.kind if parsed else None
        key = messages_key(body.get("messages"))
        remaining = attempt
        for fault in self.faults:
            if not fault.applies_to(kind) or not fault.selects(key, self.seed):
                continue
            if remaining <= fault.times:
                return fault
            remaining -= fault.times
        return None

    # -- the chat endpoint ---------------------------------------------------------------

    def _authorised(self, headers: dict[str, str]) -> bool:
        """No ``api_key`` set, or it came as ``Authorization: Bearer <key>`` or (Azure)
        ``api-key: <key>``."""
        if self.api_key is None:
            return True
        return headers.get("authorization") == f"Bearer {self.api_key}" or headers.get("api-key") == self.api_key

    def _handle_chat(self, h: _Handler, path: str, raw: bytes) -> None:
        entry: dict[str, Any] = {
            "body": None,
            "headers": {k.lower(): v for k, v in h.headers.items()},
            "query": _query(h.path),
            "deployment": _deployment(h.path),
            "fault": None,
            "status": None,
            "path": path,
            "kind": None,
            "prompt": None,
            "key": None,
            "attempt": None,
            "received": time.monotonic(),  # when the body was read (benchmarks: the judging wall)
            "sent": None,  # when the answer was written
        }
        try:  # NaN/Infinity are not JSON (and would make the canonical keys fail)
            body = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
        except ValueError:  # UnicodeDecodeError and JSONDecodeError included
            body = None
        entry["body"] = body
        with self._lock:
            self.requests.append(entry)

        def send(
            status: int, payload: Any, headers: dict[str, str] | None = None, usage: dict[str, int] | None = None
        ) -> bool:
            # Account BEFORE writing (a client may look at the counters as soon as it has the
            # response), and roll back if the write fails because the client has gone.
            clean = status == 200 and entry["fault"] is None
            with self._lock:
                entry["status"] = status
                self._account(entry, usage, clean, +1)
            ok = h._send_json(status, payload, headers)
            entry["sent"] = time.monotonic()
            if not ok:
                with self._lock:
                    entry["status"] = None
                    self._account(entry, usage, clean, -1)
            return ok

        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            send(400, _openai_error("Request body must be a JSON object with 'messages'",
                                    "invalid_request_error", None))
            return
        if not self._authorised(entry["headers"]):
            send(401, _openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
            return

        parsed = parse_prompt(body["messages"])
        key = messages_key(body["messages"])
        with self._lock:
            bkey = body_key(body)
            self.attempts[bkey] += 1
            attempt = self.attempts[bkey]
            entry.update(kind=parsed.kind if parsed else None, prompt=parsed.prompt if parsed else None, key=key,
                         attempt=attempt)
        fault = self.fault_for(body, attempt)
        kind = fault.kind if fault else None
        with self._lock:
            entry["fault"] = kind

        if kind == "drop":
            h._drop()
            return
        if kind == "hang":
            if self._closing.wait(fault.hang_seconds) or h._peer_gone():  # type: ignore[union-attr]
                h._drop()
                return
        if self.latency > 0 and self._closing.wait(self.latency):
            h._drop()
            return
        if not self._pass_hold():
            h._drop()
            return
        if kind in _STATUS_ERRORS:
            status, message, type_, code = _STATUS_ERRORS[kind]
            headers = {}
            if kind == "429" and fault.retry_after is not None:  # type: ignore[union-attr]
                headers["Retry-After"] = _format_seconds(fault.retry_after)  # type: ignore[union-attr]
            send(status, _openai_error(message, type_, code), headers)
            return
        status, payload, usage = self._completion(body, parsed, kind)
        if status != 200:
            send(status, payload)
            return
        if h._peer_gone():
            h._drop()
            return
        send(200, payload, usage=usage)

    def _refusal(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The 400 body for a parameter the model does not take (``refuse_params``; a
        ``reasoning_model`` refuses ``max_tokens``, ``temperature`` and ``top_p`` but 1), in
        OpenAI's words, one parameter per answer as OpenAI does; a model that is not a reasoning
        model refuses ``reasoning_effort``. None when the body is acceptable."""
        refused = set(self.refuse_params) | (set(REASONING_REFUSES) if self.reasoning_model else set())
        for name in REASONING_REFUSES:
            if name not in refused or name not in body:
                continue
            if name == "max_tokens":
                return _openai_error("Unsupported parameter: 'max_tokens' is not supported with this model. "
                                     "Use 'max_completion_tokens' instead.", "invalid_request_error",
                                     "unsupported_parameter", "max_tokens")
            if body[name] != 1:
                return _openai_error(f"Unsupported value: '{name}' does not support {body[name]} with this model. "
                                     "Only the default (1) value is supported.", "invalid_request_error",
                                     "unsupported_value", name)
        if "reasoning_effort" in body and not self.reasoning_model:
            return _openai_error("Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                                 "invalid_request_error", "unsupported_parameter", "reasoning_effort")
        return None

    def _completion(
        self, body: dict[str, Any], parsed: _Parsed | None, kind: str | None
    ) -> tuple[int, dict[str, Any], dict[str, Any] | None]:
        """(status, JSON payload, usage) of a chat-completions request body, given its recognised
        prompt and the fault kind of this attempt (None: none). Used for HTTP requests and batch
        lines alike."""
        if body.get("stream"):
            return 400, _openai_error("stream=true is not supported by the scripted server",
                                      "invalid_request_error", None, "stream"), None
        refusal = self._refusal(body)
        if refusal is not None:
            return 400, refusal, None

        response_format = body.get("response_format") or {}
        rf_type = response_format.get("type", "text") if isinstance(response_format, dict) else "text"
        if rf_type == "json_schema" and self.refuse_json_schema:
            schema = (response_format.get("json_schema") or {}).get("schema", {})
            message = LLAMACPP_SCHEMA_REFUSAL.format(schema=canonical_json(schema))
            return 400, _llamacpp_error(message), None
        if rf_type == "json_object" and self.refuse_json_object:
            return 400, _llamacpp_error(JSON_OBJECT_REFUSAL), None
        if rf_type not in ("text", "json_object", "json_schema"):
            return 400, _openai_error(f"Invalid response_format type {rf_type!r}",
                                      "invalid_request_error", None, "response_format"), None
        if parsed is None:
            return 400, _openai_error(
                "Scripted server: the messages do not start with a rendering of a shipped prompt "
                "(decompose or judge_chunk, any version)",
                "invalid_request_error", None, "messages"), None

        if parsed.kind == "decompose":
            answer = self._script.decompose(parsed)
        elif parsed.kind == "judge_chunks":
            answer = self._script.judge_chunks(parsed, self.listwise_omit)
        else:
            answer = self._script.judge_chunk(parsed)
        finish_reason = "stop"
        if kind == "wrong_schema":
            answer = dict(WRONG_SCHEMA_ANSWER)
        elif kind == "invented_evidence":
            # One extra claim, for a statement the chunk does not support (statement 1 if it
            # supports all): if the client counted it, the chunk's support would grow.
            claimed = {s["statement"] for s in answer["supports"]}
            unsupported = [n for n in range(1, len(parsed.inputs["statements"]) + 1) if n not in claimed]
            target = unsupported[0] if unsupported else 1
            invented = {"statement": target, "evidence": INVENTED_EVIDENCE}
            answer = {**answer, "supports": [invented, *answer["supports"]]}

        if kind == "malformed":
            content = MALFORMED_CONTENT
        elif rf_type in ("json_object", "json_schema"):
            content = json.dumps(answer, ensure_ascii=False)
        else:
            content = (
                "Here is my answer.\n\n```json\n"
                + json.dumps(answer, ensure_ascii=False, indent=2)
                + "\n```\n\nI hope this helps."
            )
        if kind == "truncated":
            content = content[: len(content) // 2]
            finish_reason = "length"

        prompt_chars = sum(len(_content_text(m.get("content"))) for m in body["messages"] if isinstance(m, dict))
        usage: dict[str, Any] = {
            "prompt_tokens": estimate_tokens(prompt_chars),
            "completion_tokens": estimate_tokens(len(content)) + self.reasoning_tokens,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if self.prompt_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": self._cached_prefix(body["messages"])}
        if self.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage,
            "system_fingerprint": "scripted",
        }
        return 200, payload, usage

    def _cached_prefix(self, messages: list[Any]) -> int:
        """Prompt tokens served from a simulated provider prompt cache (OpenAI's rules, in
        characters: a prefix of at least 1024 tokens, counted in steps of 128 tokens, shared with
        an earlier request); every prefix of this request is cached from now on."""
        text = "".join(f"{m.get('role')}\n{_content_text(m.get('content'))}\n" for m in messages if isinstance(m, dict))
        step, least = 128 * 4, 1024 * 4
        cut = least
        cached = 0
        with self._prefix_lock:
            while cut <= len(text):
                digest = hashlib.sha256(text[:cut].encode("utf-8")).digest()
                if digest in self._prefixes:
                    cached = cut
                else:
                    self._prefixes.add(digest)
                cut += step
        return estimate_tokens(cached) if cached else 0

    # -- the files and batches endpoints -------------------------------------------------

    def release_batches(self) -> None:
        """Let held batches (``batch_hold=True``) finish at their next poll."""
        self._batches_released.set()

    def _handle_api(self, h: _Handler, method: str, raw: bytes) -> None:
        """``/v1/files`` and ``/v1/batches`` (also under Azure's ``/openai/``)."""
        path = _route(h.path.split("?", 1)[0].rstrip("/"))
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.api_requests.append({"method": method, "path": h.path.split("?", 1)[0], "query": _query(h.path),
                                      "headers": headers})
        if not self._authorised(headers):
            h._send_json(401, _openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
            return
        parts = path.strip("/").split("/")[1:]  # without "v1"
        try:
            if parts == ["files"] and method == "POST":
                status, payload = self._upload(headers.get("content-type", ""), raw)
            elif len(parts) == 3 and parts[0] == "files" and parts[2] == "content" and method == "GET":
                file = self.files.get(parts[1])
                if file is None:
                    status, payload = 404, _openai_error(f"No such file: {parts[1]}", "invalid_request_error", None)
                else:
                    h._send_bytes(200, file["data"], "application/octet-stream")
                    return
            elif len(parts) == 2 and parts[0] == "files" and method == "GET":
                file = self.files.get(parts[1])
                status, payload = (200, self._file_object(parts[1])) if file is not None else (
                    404, _openai_error(f"No such file: {parts[1]}", "invalid_request_error", None))
            elif parts == ["batches"] and method == "POST":
                status, payload = self._create_batch(json.loads(raw.decode("utf-8") or "{}"))
            elif parts == ["batches"] and method == "GET":
                with self._lock:
                    data = [self._batch_object(b) for b in sorted(self.batches.values(), key=lambda b: -b["seq"])]
                status, payload = 200, {"object": "list", "data": data, "has_more": False,
                                        "first_id": data[0]["id"] if data else None,
                                        "last_id": data[-1]["id"] if data else None}
            elif len(parts) == 2 and parts[0] == "batches" and method == "GET":
                status, payload = self._poll_batch(parts[1])
            elif len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel" and method == "POST":
                with self._lock:
                    batch = self.batches.get(parts[1])
                    if batch is not None and batch["status"] in ("validating", "in_progress"):
                        batch["status"] = "cancelled"
                        batch["cancelled_at"] = int(time.time())
                status, payload = (200, self._batch_object(batch)) if batch is not None else (
                    404, _openai_error(f"No such batch: {parts[1]}", "invalid_request_error", None))
            else:
                status, payload = 404, _openai_error(f"Unknown path {path}", "invalid_request_error", None)
        except ValueError as exc:  # an unreadable upload or JSON body
            status, payload = 400, _openai_error(f"Bad request: {exc}", "invalid_request_error", None)
        h._send_json(status, payload)

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        message = email.message_from_bytes(b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw,
                                           policy=email.policy.HTTP)
        fields: dict[str, Any] = {}
        filename = "upload.jsonl"
        for part in message.iter_parts() if message.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            data = part.get_payload(decode=True) or b""
            if name == "file":
                filename = part.get_filename() or filename
            fields[str(name)] = data
        if "file" not in fields or fields.get("purpose", b"").decode() != "batch":
            return 400, _openai_error("expected a multipart upload with 'file' and purpose 'batch'",
                                      "invalid_request_error", None)
        with self._lock:
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            self.files[file_id] = {"data": fields["file"], "filename": filename, "purpose": "batch",
                                   "created_at": int(time.time())}
        return 200, self._file_object(file_id)

    def _file_object(self, file_id: str) -> dict[str, Any]:
        f = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(f["data"]), "created_at": f["created_at"],
                "filename": f["filename"], "purpose": f["purpose"], "status": "processed"}

    def _create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        file_id = body.get("input_file_id")
        if file_id not in self.files:
            return 400, _openai_error(f"No such file: {file_id}", "invalid_request_error", None, "input_file_id")
        if body.get("endpoint") not in ("/v1/chat/completions", "/chat/completions"):
            return 400, _openai_error("endpoint must be /v1/chat/completions", "invalid_request_error", None,
                                      "endpoint")
        if body.get("completion_window") != "24h":
            return 400, _openai_error("completion_window must be 24h", "invalid_request_error", None,
                                      "completion_window")
        with self._lock:
            batch_id = f"batch_{uuid.uuid4().hex[:24]}"
            now = int(time.time())
            self.batches[batch_id] = {
                "id": batch_id, "seq": len(self.batches), "object": "batch", "endpoint": body["endpoint"],
                "input_file_id": file_id, "completion_window": "24h", "status": "validating", "created_at": now,
                "expires_at": now + 86400, "metadata": body.get("metadata") or None, "output_file_id": None,
                "error_file_id": None, "errors": None, "polls": 0, "lines": self._batch_lines(file_id),
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
            }
            self.batches[batch_id]["request_counts"]["total"] = len(self.batches[batch_id]["lines"])
            return 200, self._batch_object(self.batches[batch_id])

    def _batch_lines(self, file_id: str) -> list[Any]:
        lines = []
        for line in self.files[file_id]["data"].decode("utf-8", errors="replace").splitlines():
            if line.strip():
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    lines.append(None)
        return lines

    @staticmethod
    def _batch_object(batch: dict[str, Any]) -> dict[str, Any]:
        """The public shape of a batch (openai.types.Batch)."""
        hidden = {"seq", "polls", "lines"}
        return {k: v for k, v in batch.items() if k not in hidden}

    def _poll_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        """GET /v1/batches/{id}: each poll moves the batch on: validating -> in_progress ->
        (unless held) completed, expired (``batch_outcome="expire"``: the second half of the
        lines unfinished) or failed (``batch_outcome="fail"``: the whole batch, at validation)."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, _openai_error(f"No such batch: {batch_id}", "invalid_request_error", None)
            batch["polls"] += 1
            now = int(time.time())
            if batch["status"] == "validating":
                problem = self._invalid_lines(batch)
                if self.batch_outcome == "fail" or problem is not None:
                    line, message = problem or (1, "scripted: the batch failed")
                    batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [
                        {"code": "invalid_request", "message": message, "param": None, "line": line}]})
                else:
                    batch.update(status="in_progress", in_progress_at=now)
            elif batch["status"] == "in_progress" and (not self.batch_hold or self._batches_released.is_set()):
                self._finish(batch, now)
            return 200, self._batch_object(batch)

    @staticmethod
    def _invalid_lines(batch: dict[str, Any]) -> tuple[int, str] | None:
        seen: set[str] = set()
        for n, line in enumerate(batch["lines"], start=1):
            if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
                return n, "each line must be a JSON object with a 'body' object"
            custom_id = line.get("custom_id")
            if not isinstance(custom_id, str) or custom_id in seen:
                return n, f"missing or duplicate custom_id {custom_id!r}"
            seen.add(custom_id)
            if line.get("method") != "POST" or line.get("url") != batch["endpoint"]:
                return n, f"method must be POST and url {batch['endpoint']}"
        return None

    def _finish(self, batch: dict[str, Any], now: int) -> None:
        """Answer the lines of a batch (caller holds the lock): output and error files."""
        lines = batch["lines"]
        answered = len(lines) if self.batch_outcome != "expire" else len(lines) // 2
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for n, line in enumerate(lines):
            if n >= answered:
                errors.append({"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": line["custom_id"],
                               "response": None, "error": {"code": "batch_expired", "message": (
                                   "This request could not be executed before the completion window expired.")}})
                continue
            result = self._batch_result(line)
            (output if result["response"]["status_code"] == 200 else errors).append(result)
        for name, rows in (("output_file_id", output), ("error_file_id", errors)):
            if rows:
                file_id = f"file-{uuid.uuid4().hex[:24]}"
                data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
                self.files[file_id] = {"data": data, "filename": f"{batch['id']}_{name}.jsonl",
                                       "purpose": "batch_output", "created_at": now}
                batch[name] = file_id
        batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(errors)}
        if self.batch_outcome == "expire":
            batch.update(status="expired", expired_at=now)
        else:
            batch.update(status="completed", finalizing_at=now, completed_at=now)

    def _batch_result(self, line: dict[str, Any]) -> dict[str, Any]:
        """One output line for a request line (OpenAI's and vLLM's shape); a 200 is counted in
        :attr:`batch_served` and :attr:`batch_usage` (caller holds the lock, or runs alone)."""
        body = line["body"]
        parsed = parse_prompt(body.get("messages")) if isinstance(body.get("messages"), list) else None
        if parsed is None and not isinstance(body.get("messages"), list):
            status, payload, usage = 400, _openai_error("'messages' is required", "invalid_request_error", None), None
        else:
            status, payload, usage = self._completion(body, parsed, None)
        if status == 200 and usage is not None:
            self.batch_served[messages_key(body["messages"])] += 1
            for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
                self.batch_usage[k] += usage[k]
        return {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": line.get("custom_id"),
                "response": {"status_code": status, "request_id": uuid.uuid4().hex, "body": payload},
                "error": None}

    def run_batch_file(self, src: str | Path, dest: str | Path) -> int:
        """Answer a batch request file offline, as ``vllm run-batch -i SRC -o DEST`` does: one
        output line per request line (errors included, in the same file). No HTTP; returns the
        number of lines written."""
        rows = []
        for line in Path(src).read_text(encoding="utf-8").splitlines():
            if line.strip():
                with self._lock:
                    rows.append(self._batch_result(json.loads(line)))
        Path(dest).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return len(rows)

    def _account(self, entry: dict[str, Any], usage: dict[str, int] | None, clean: bool, sign: int) -> None:
        """Add (sign=+1) or remove (sign=-1) one answer from the counters; caller holds the lock."""
        if usage is not None:
            for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
                self.usage[k] += sign * usage[k]
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                self.cached_tokens += sign * int(details.get("cached_tokens", 0))
        if clean:
            self.completions += sign
            self.served_keys[entry["key"]] += sign
            if self.served_keys[entry["key"]] <= 0:
                del self.served_keys[entry["key"]]


def _route(path: str) -> str:
    """The OpenAI path of a request path: Azure's ``/openai/deployments/<name>/chat/completions``
    and ``/openai/files`` are ``/v1/chat/completions`` and ``/v1/files``; a path without ``/v1``
    gains it."""
    path = path.split("?", 1)[0].rstrip("/")
    m = re.fullmatch(r"/openai/deployments/[^/]+(/.*)", path)
    if m:
        return "/v1" + m.group(1)
    if path.startswith("/openai/"):
        return "/v1" + path[len("/openai"):]
    return path if path.startswith("/v1/") else "/v1" + path


def _query(raw_path: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(raw_path).query))


def _deployment(raw_path: str) -> str | None:
    m = re.match(r"/openai/deployments/([^/?]+)/", raw_path)
    return m.group(1) if m else None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _format_seconds(seconds: float) -> str:
    """``Retry-After`` value: an integer when whole (``"2"``), else a decimal (``"0.05"``)."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return repr(float(seconds))
