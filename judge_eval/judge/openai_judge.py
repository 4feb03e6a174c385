"""The OpenAI-compatible transport: HTTP, retries, the response-format chain and fail-fast.

Works against OpenAI, Azure OpenAI (the v1 endpoint, or classic deployment URLs with an
``api-version``: ``azure=True``), vLLM, Ollama, llama.cpp's ``llama-server`` and anything else that
speaks ``POST /v1/chat/completions``. See ``docs/judge.md`` for the full behaviour.
:class:`OpenAITransport` sends one request of the judge core (:mod:`judge_eval.judge.core`, which
does the cache, parsing, checks, the repair and storing):

1. **structured output** -- ``json_schema`` (the prompt's strict schema) -> ``json_object`` ->
   plain text with JSON extraction. The transport steps down only when the server rejects the
   format with a 400/422 that names it (llama.cpp: ``JSON schema conversion failed``). The
   working format is remembered per endpoint (base URL + model) in memory and in the cache, so the
   next run starts there. While the format of an endpoint is unknown, one task probes at a time,
   so a refusing server sees one refused request, not one per concurrent task. The format is part
   of the cache key (:meth:`OpenAITransport.key_fields`); a repair is sent in the format of the
   answer it repairs.
2. **retries** (tenacity, ours: the openai client runs with ``max_retries=0``) -- 429 (honouring
   ``retry-after-ms`` / ``Retry-After``, capped at ``max_retry_wait``), 408, 5xx, timeouts and
   connection errors, with exponential backoff and jitter, up to ``max_attempts`` attempts per
   request. Never 400/401/403/404/422. A connection that cannot even be opened to an endpoint
   that has never answered this judge is ``JudgeCallError("connection_refused")`` at once (no
   server there: retrying only delays the message); once the endpoint has answered, it is a
   restart and retried as ``connection``.
3. **request parameters** -- reasoning models (OpenAI's o-series, the gpt-5 family) refuse
   ``max_tokens`` (they take ``max_completion_tokens``) and any ``temperature`` but their default.
   On a 400 that names such a parameter the transport renames it (``max_tokens``) or stops sending
   it (``temperature``, ``top_p``, ``seed``) and sends the request again, once per parameter; what
   it learnt is remembered per endpoint like the format (in memory and in the cache's
   ``endpoint_params`` table). A parameter no longer sent changes the answer, so it is part of the
   cache key (``server_default``); a renamed one does not.

:class:`OpenAIJudge` is the judge core with this transport, built from one set of options.

HTTP: requests go through :mod:`judge_eval.judge.http` (aiohttp), not the openai SDK, whose
request path cost about 2 ms of CPU per call; the SDK is kept for the Batch API (files, batches).
A status error's text is the ``error.message`` of an OpenAI-style error body, else the body.

Secrets: the API key is in the request headers (and the Batch API's openai client) and nowhere
else. It is not in the cache key, any cache row, ``identity``, ``repr``, log or error message
(messages are scrubbed of it, and errors are raised ``from None`` so nothing that held the
headers is chained).
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import math
import os
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from judge_eval.cache import ResponseCache
from judge_eval.errors import FATAL_CAUSES, ConfigError, JudgeCallError
from judge_eval.judge.core import Completion, CompletionRequest, Decoding, JudgeCore
from judge_eval.judge.http import ConnectFailed, Disconnected, HTTPReply, JSONPoster, TimedOut
from judge_eval.judge.prompts import PromptSelection
from judge_eval.usage import Usage
from judge_eval.version import package_version

if TYPE_CHECKING:
    import openai


def _openai() -> Any:
    """The openai package, imported on first use: importing it costs most of a second of CPU,
    which a run whose answers are all cached never needs to spend."""
    import openai

    return openai


__all__ = [
    "ADAPTABLE_PARAMS",
    "FORMAT_CHAIN",
    "REASONING_EFFORTS",
    "OpenAIJudge",
    "OpenAITransport",
    "RetryEvent",
    "completion_text",
    "endpoint_identity",
    "usage_of",
]

_USER_AGENT = f"judge-eval/{package_version()}"

#: structured-output formats, best first; the client moves right only on a format refusal
FORMAT_CHAIN: tuple[str, ...] = ("json_schema", "json_object", "text")

ResponseFormatChoice = Literal["auto", "json_schema", "json_object", "text"]

#: words in a 400/422 error that mark it as a refusal of the response_format (not of the request)
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "structured output", "json mode")

#: request parameters a model may refuse, and what is sent instead: another name, or None for
#: nothing (the server's default applies, which changes the answer: see ``key_fields``)
ADAPTABLE_PARAMS: dict[str, str | None] = {
    "max_tokens": "max_completion_tokens",
    "temperature": None,
    "top_p": None,
    "seed": None,
}
#: words in a 400/422 error that mark it as a refusal of a parameter or of its value
_UNSUPPORTED_WORDS = ("unsupported", "not supported", "does not support", "only the default", "not allowed")

#: values of ``reasoning_effort`` (OpenAI's reasoning models; which ones a model takes varies)
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh")


@dataclass(frozen=True)
class RetryEvent:
    """One backoff taken before a retry: why, which attempt failed, how long we waited, and the
    server's ``Retry-After`` (seconds) if it sent one."""

    cause: str
    attempt: int
    wait: float
    retry_after: float | None


class _Retryable(Exception):
    def __init__(self, cause: str, message: str, retry_after: float | None = None) -> None:
        self.cause = cause
        self.message = message
        self.retry_after = retry_after
        super().__init__(message)


class _FormatRejected(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


class _ParamRejected(Exception):
    def __init__(self, param: str, status: int, message: str) -> None:
        self.param = param
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass
class _Account:
    calls: int = 0
    usage: Usage = field(default_factory=Usage)


def _split_url(base_url: str | None) -> tuple[str, str, str]:
    """(scheme, host[:port], path) of a base URL, without user info, query or fragment."""
    if not base_url:
        return "https", "api.openai.com", "/v1"
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        host = f"{host}:{port}"
    return parts.scheme or "http", host, parts.path.rstrip("/")


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def _identity_host(base_url: str | None) -> str:
    """The host of ``base_url`` as it appears in an identity: no port, no credentials,
    lower case; every loopback or unspecified address (``localhost``, ``127.0.0.0/8``, ``::1``,
    ``0.0.0.0``, ``::``) is ``localhost``."""
    if not base_url:
        return "api.openai.com"
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    host = (parts.hostname or "").lower().rstrip(".")
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return "localhost"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback or ip.is_unspecified:
        return "localhost"
    return f"[{host}]" if ip.version == 6 else host


def endpoint_identity(base_url: str | None, model: str) -> str:
    """``openai:<host>/<model>``: who judged, as recorded in results and cache rows (and hashed
    into every cache key). No port, so a local server restarted on another port still finds its
    answers; loopback addresses are all ``localhost``."""
    return f"openai:{_identity_host(base_url)}/{model}"


def _redact_url(url: str) -> str:
    """``url`` without the user info (``user:password@``) of its authority."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1***@", url)


def _check_base_url(base_url: str) -> None:
    """ConfigError unless ``base_url`` is ``http(s)://host[:port][/path]``."""
    ok = not any(c.isspace() for c in base_url)
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        ok = False
    else:
        ok = ok and parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    if not ok:
        raise ConfigError(
            "base_url must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8080/v1; "
            f"got {_redact_url(base_url)!r}"
        )


def _parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (milliseconds) or ``Retry-After`` (seconds, or an
    HTTP date). None when absent or unparseable."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            value = float(ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
    except (TypeError, ValueError):
        pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(raw))
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())



class OpenAITransport:
    """The :class:`~judge_eval.judge.core.Transport` of an OpenAI-compatible endpoint.

    Parameters
    ----------
    model: model (or Azure deployment) name sent to the server.
    base_url: e.g. ``http://localhost:8080/v1``; default ``$OPENAI_BASE_URL``, else OpenAI. With
        ``azure=True``: the resource endpoint ``https://<resource>.openai.azure.com``, default
        ``$AZURE_OPENAI_ENDPOINT``.
    api_key: default ``$OPENAI_API_KEY`` (``azure``: ``$AZURE_OPENAI_API_KEY``, else the Entra ID
        token in ``$AZURE_OPENAI_AD_TOKEN``). Required for OpenAI's own endpoint and for Azure; for
        another base URL without a key a placeholder is sent (local servers ignore it).
    cache: a :class:`ResponseCache`, where the working response format and request parameters of
        an endpoint are remembered across runs (None: in memory only).
    timeout: seconds per HTTP request. max_attempts: attempts per request (1 = no retry).
    concurrency: requests in flight at once (an asyncio semaphore held only while a request
        is on the wire, not during backoff).
    namespace: replaces the identity (``openai:<host>/<model>``) in rows, keys and messages.
    max_retry_wait: cap (seconds) on any single backoff, ``Retry-After`` included.
    retry_base_wait: first backoff (seconds) before jitter; doubles per attempt.
    response_format: ``auto`` (the chain, remembered per endpoint) or one fixed format.
    reasoning_effort: sent as ``reasoning_effort`` (reasoning models); part of the cache key.
    azure: classic Azure OpenAI deployment URLs through ``openai.AsyncAzureOpenAI``
        (``{base_url}/openai/deployments/{model}/chat/completions?api-version=...``, the key in an
        ``api-key`` header, a token as ``Authorization: Bearer``). api_version: its
        ``api-version`` (default ``$OPENAI_API_VERSION``; required).
    """

    #: judges several chunks in one call (JudgeCore.judge_chunks)
    listwise = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        timeout: float = 60.0,
        max_attempts: int = 5,
        concurrency: int = 32,
        namespace: str | None = None,
        max_retry_wait: float = 60.0,
        retry_base_wait: float = 1.0,
        response_format: ResponseFormatChoice = "auto",
        reasoning_effort: str | None = None,
        azure: bool = False,
        api_version: str | None = None,
    ) -> None:
        if not model:
            raise ConfigError("the judge needs a model name")
        if response_format not in ("auto", *FORMAT_CHAIN):
            raise ConfigError(
                f"response_format must be auto, json_schema, json_object or text, got {response_format!r}"
            )
        if reasoning_effort is not None and reasoning_effort not in REASONING_EFFORTS:
            raise ConfigError(f"must be one of {', '.join(REASONING_EFFORTS)}, got {reasoning_effort!r}",
                              option="--reasoning-effort")
        if max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        if concurrency < 1:
            raise ConfigError("concurrency must be at least 1")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout < math.inf:
            raise ConfigError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
        self.azure = bool(azure)
        self.api_version: str | None = None
        self._token = False  # the credential is an Entra ID token (Azure), not a key
        if self.azure:
            base_url, api_key = self._azure_settings(base_url, api_key, api_version)
        else:
            if base_url is None:
                base_url = os.environ.get("OPENAI_BASE_URL") or None
            base_url = base_url or None
            if base_url is not None:
                _check_base_url(base_url)
            if api_key is None:
                api_key = os.environ.get("OPENAI_API_KEY") or None
            if api_key is None:
                if base_url is None:
                    raise ConfigError(
                        "no API key for api.openai.com: set OPENAI_API_KEY or pass api_key "
                        "(or set base_url / OPENAI_BASE_URL for a local server)"
                    )
                api_key = "no-key"  # local servers (llama.cpp, Ollama, vLLM) accept any key
        self.model = model
        self.base_url = base_url
        self.__api_key = api_key  # private: not in repr, identity, keys or rows
        self.cache = cache
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        self.concurrency = int(concurrency)
        self.max_retry_wait = float(max_retry_wait)
        self.retry_base_wait = float(retry_base_wait)
        self.response_format: ResponseFormatChoice = response_format
        self.reasoning_effort = reasoning_effort
        self.namespace = namespace
        self.identity = namespace if namespace else endpoint_identity(base_url, model)
        scheme, host, path = _split_url(base_url)
        #: key of the remembered structured-output format and parameters: base URL (no
        #: credentials) + model; for Azure the deployment path and the api-version
        if self.azure:
            self.endpoint = f"{scheme}://{host}/openai/deployments/{model}?api-version={self.api_version} {model}"
        else:
            self.endpoint = f"{scheme}://{host}{path} {model}"
        #: every backoff taken, in order (for diagnostics and tests)
        self.retry_log: list[RetryEvent] = []
        self._rng = random.Random()
        self._format: str | None = None
        self._confirmed = False
        self._looked: dict[str, float] = {}  # when the cache was last asked for the endpoint's memory
        #: request parameter -> the name it is sent as, or None: not sent (None: not yet known)
        self._params: dict[str, str | None] | None = None
        self._params_stored = False  # _params is what the cache remembers for the endpoint
        self._answered = False  # the endpoint sent an HTTP response to this judge at least once
        self._probe_open = False  # a probe failed (not on format): stop serialising tasks
        #: the first error of this event loop that means every request will be refused
        #: (FATAL_CAUSES): requests not sent yet are failed with it instead of being sent
        self._refused: JudgeCallError | None = None
        self._http = JSONPoster(*self._route(), timeout=self.timeout, limit=self.concurrency)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._sem: asyncio.Semaphore | None = None
        self._probe_lock: asyncio.Lock | None = None

    def _route(self) -> tuple[str, dict[str, str]]:
        """The chat-completions URL and the headers of every request (as the openai SDK sends
        them: ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` from the environment as its headers)."""
        headers = {"User-Agent": _USER_AGENT}
        if self.azure:
            assert self.base_url is not None and self.api_version is not None
            url = (f"{self.base_url}/openai/deployments/{quote(self.model, safe='')}/chat/completions"
                   f"?api-version={quote(self.api_version, safe='')}")
            if self._token:
                headers["Authorization"] = f"Bearer {self.__api_key}"
            else:
                headers["api-key"] = self.__api_key
            return url, headers
        url = (self.base_url or "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
        headers["Authorization"] = f"Bearer {self.__api_key}"
        for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env):
                headers[header] = os.environ[env]
        return url, headers

    def _azure_settings(
        self, base_url: str | None, api_key: str | None, api_version: str | None
    ) -> tuple[str, str]:
        """Endpoint and credential of an Azure judge (arguments, else the environment)."""
        base_url = base_url or os.environ.get("AZURE_OPENAI_ENDPOINT") or None
        if base_url is None:
            raise ConfigError("Azure OpenAI needs the resource endpoint: pass --base-url "
                              "https://<resource>.openai.azure.com or set AZURE_OPENAI_ENDPOINT", option="--base-url")
        _check_base_url(base_url)
        if re.search(r"/openai/v1/?$", urlsplit(base_url).path):
            raise ConfigError("a .../openai/v1/ URL is Azure's v1 API, which takes the plain OpenAI client: use "
                              "--base-url with it and no --api-version (--api-version is for the deployment URLs)",
                              option="--base-url")
        if urlsplit(base_url).path.strip("/") not in ("", "openai"):
            raise ConfigError("give the resource endpoint only (https://<resource>.openai.azure.com); the "
                              "deployment is --model", option="--base-url")
        api_version = api_version or os.environ.get("OPENAI_API_VERSION") or None
        if not api_version or any(c.isspace() for c in api_version):
            raise ConfigError("Azure OpenAI's deployment URLs need an api-version, e.g. 2024-10-21: pass "
                              "--api-version or set OPENAI_API_VERSION", option="--api-version")
        self.api_version = api_version
        if api_key is None:
            api_key = os.environ.get("AZURE_OPENAI_API_KEY") or None
        if api_key is None:
            api_key = os.environ.get("AZURE_OPENAI_AD_TOKEN") or None
            self._token = api_key is not None
        if api_key is None:
            raise ConfigError("no credential for Azure OpenAI: set AZURE_OPENAI_API_KEY (the resource key) or "
                              "AZURE_OPENAI_AD_TOKEN (a Microsoft Entra ID token)")
        return re.sub(r"/openai/?$", "", base_url.rstrip("/")), api_key

    def __repr__(self) -> str:
        return f"OpenAITransport(identity={self.identity!r}, endpoint={self.endpoint!r})"

    # -- plumbing -----------------------------------------------------------------------------

    def _ensure(self) -> None:
        """The semaphore and probe lock of the running event loop (made on first use in each
        loop: asyncio primitives belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._sem = asyncio.Semaphore(self.concurrency)
            self._probe_lock = asyncio.Lock()
            self._refused = None  # a new run tries again (the server may be up, the key fixed)
            self._loop = loop

    def client(self) -> openai.AsyncOpenAI:
        """The openai client of the running event loop (for the Batch API: files, batches)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            openai = _openai()
            # The SDK's default HTTP client schedules its own close on whatever loop runs when it
            # is garbage-collected, which fails for a client of an earlier, closed loop; the
            # public DefaultAsyncHttpxClient has the same defaults without that hook.
            common: dict[str, Any] = {
                "timeout": self.timeout,
                "max_retries": 0,
                "http_client": openai.DefaultAsyncHttpxClient(),
            }
            if self.azure:
                assert self.base_url is not None
                if self._token:
                    self._client = openai.AsyncAzureOpenAI(
                        azure_endpoint=self.base_url, api_version=self.api_version, azure_ad_token=self.__api_key,
                        **common,
                    )
                else:
                    self._client = openai.AsyncAzureOpenAI(
                        azure_endpoint=self.base_url, api_version=self.api_version, api_key=self.__api_key, **common
                    )
            else:
                self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self.__api_key, **common)
            self._client_loop = loop
        return self._client

    @property
    def batch_url(self) -> str:
        """The ``url`` of a chat-completions line in a batch request file."""
        return "/chat/completions" if self.azure else "/v1/chat/completions"

    async def aclose(self) -> None:
        """Close the HTTP connections (those of the running loop; connections of an earlier,
        closed loop cannot be closed any more and are just dropped). The transport stays usable:
        the next request opens new ones."""
        await self._http.aclose()
        if self._client is not None:
            client, loop = self._client, self._client_loop
            self._client, self._client_loop = None, None
            if loop is asyncio.get_running_loop():
                await client.close()

    def scrub(self, text: str) -> str:
        """``text`` without the API key (or anything that looks like a bearer token/key)."""
        key = self.__api_key
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        text = re.sub(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+", "Bearer ***", text)
        text = re.sub(r"\bsk-[A-Za-z0-9_-]{6,}", "sk-***", text)
        return text

    # -- formats ------------------------------------------------------------------------------

    def current_format(self) -> str:
        """The structured-output format the next request will try."""
        if self.response_format != "auto":
            return self.response_format
        if self._format is None and self.cache is not None and self._due("format"):
            remembered = self.cache.get_format(self.endpoint)
            if remembered is not None:
                self._format = remembered
                self._confirmed = True
        return self._format or FORMAT_CHAIN[0]

    def _due(self, what: str) -> bool:
        """Whether to look up what the cache remembers of the endpoint (``format``, ``params``)
        again: while it remembers nothing, at most once a second (another process may store it
        meanwhile), not once per task (two SQL queries per cache hit)."""
        now = time.monotonic()
        if now - self._looked.get(what, -math.inf) < 1.0:
            return False
        self._looked[what] = now
        return True

    def _lower_format(self, fmt: str) -> None:
        if self._format is None or FORMAT_CHAIN.index(fmt) > FORMAT_CHAIN.index(self._format):
            self._format = fmt

    def _confirm_format(self, fmt: str) -> None:
        if self._confirmed and self._format == fmt:
            return
        self._format = fmt
        self._confirmed = True
        if self.cache is not None:
            self.cache.set_format(self.endpoint, fmt)

    @staticmethod
    def _format_spec(fmt: str, request: CompletionRequest) -> dict[str, Any]:
        if fmt == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "strict": True, "schema": request.schema},
            }
        if fmt == "json_object":
            # llama.cpp's servers constrain JSON mode to a schema given here; servers that do
            # not know the field ignore it (or refuse it, and the chain moves on to text).
            return {"type": "json_object", "schema": request.schema}
        return {"type": "text"}

    @staticmethod
    def _format_of(fields: Mapping[str, Any]) -> str:
        """The format of a completion's key fields (the format a repair must be sent in)."""
        return str(fields["response_format"]["type"])

    # -- request parameters -------------------------------------------------------------------

    def current_params(self) -> dict[str, str | None]:
        """How the request parameters are sent to this endpoint: parameter -> the name it is sent
        as, or None when it is not sent; empty until a refusal taught otherwise (or the cache
        remembers one)."""
        if self._params is None and self.cache is not None and self._due("params"):
            remembered = self.cache.get_params(self.endpoint)
            if remembered is not None:
                self._params = {k: v for k, v in remembered.items() if k in ADAPTABLE_PARAMS}
                self._params_stored = True
        return dict(self._params or {})

    def _params_known(self) -> bool:
        self.current_params()
        return self._params_stored

    def _confirm_params(self) -> None:
        """A request went through: the parameters are right; remember them for the endpoint."""
        if self._params_stored:
            return
        self._params = self.current_params()
        self._params_stored = True
        if self.cache is not None:
            self.cache.set_params(self.endpoint, self._params)

    def _adapt(self, param: str) -> bool:
        """Send ``param`` the way the endpoint takes it from now on; False when there is nothing
        left to change (it is already adapted, or not a parameter that can be)."""
        params = self.current_params()
        if param not in ADAPTABLE_PARAMS or param in params:
            return False
        params[param] = ADAPTABLE_PARAMS[param]
        self._params = params
        self._params_stored = False  # stored when a request goes through
        return True

    def known(self) -> bool:
        """Whether the endpoint's format and parameters are known (remembered or confirmed), so a
        request needs no probe."""
        fmt_known = self.response_format != "auto" or (self.current_format() and self._confirmed)
        return bool(fmt_known) and self._params_known()

    # -- requests -----------------------------------------------------------------------------

    def key_fields(self, request: CompletionRequest, fmt: str | None = None) -> dict[str, Any]:
        """What this transport adds to the cache key: the model and the response format (the
        full schema for ``json_schema``; ``{"type": "text"}`` in text mode); ``reasoning_effort``
        when one is set; ``server_default``: the decoding parameters the request would carry that
        this endpoint is not sent (it refused them, so its default applies; a renamed parameter
        changes nothing). ``fmt``: that format instead of the one the next request will try.
        Fields that are absent leave the keys of earlier versions unchanged."""
        fields: dict[str, Any] = {
            "model": self.model,
            "response_format": self._format_spec(fmt or self.current_format(), request),
        }
        if self.reasoning_effort is not None:
            fields["reasoning_effort"] = self.reasoning_effort
        wanted = self._decoding_kwargs(request.decoding)
        dropped = sorted(p for p, sent in self.current_params().items() if sent is None and p in wanted)
        if dropped:
            fields["server_default"] = dropped
        return fields

    @staticmethod
    def _decoding_kwargs(decoding: Decoding) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"temperature": decoding.temperature, "max_tokens": decoding.max_tokens}
        if decoding.seed is not None:
            kwargs["seed"] = decoding.seed
        if decoding.top_p is not None:
            kwargs["top_p"] = decoding.top_p
        return kwargs

    def request_body(self, request: CompletionRequest, fmt: str | None = None) -> dict[str, Any]:
        """The chat-completions body of ``request`` as it is sent (format ``fmt``, default the
        current one; parameters adapted to the endpoint)."""
        fmt = fmt or self.current_format()
        body: dict[str, Any] = {"model": self.model, "messages": request.messages}
        for name, value in self._decoding_kwargs(request.decoding).items():
            sent = self.current_params().get(name, name)
            if sent is not None:
                body[sent] = value
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        if fmt != "text":
            body["response_format"] = self._format_spec(fmt, request)
        return body

    def _wait(self, state: RetryCallState) -> float:
        """Backoff before the next attempt: the server's Retry-After plus up to 10% jitter when it
        sent one, else ``b/2 + U(0, b/2)`` with ``b = retry_base_wait * 2**(attempt-1)``; both
        capped at ``max_retry_wait``."""
        exc = state.outcome.exception() if state.outcome is not None else None
        attempt = state.attempt_number
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            wait = retry_after + self._rng.uniform(0, min(1.0, 0.1 * retry_after))
        else:
            base = self.retry_base_wait * (2 ** (attempt - 1))
            base = min(base, self.max_retry_wait)
            wait = base / 2 + self._rng.uniform(0, base / 2)
        wait = min(wait, self.max_retry_wait)
        self.retry_log.append(RetryEvent(getattr(exc, "cause", "unknown"), attempt, wait, retry_after))
        return wait

    @staticmethod
    def _error_fields(reply: HTTPReply) -> dict[str, Any]:
        """The fields of an OpenAI-style error body (``{"error": {"message", "param", ...}}``, or
        those fields at the top level); empty when the body is not a JSON object."""
        try:
            data = reply.json()
        except ValueError:
            return {}
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            data = data["error"]
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _error_text(reply: HTTPReply, fields: Mapping[str, Any]) -> str:
        """The message of an error answer: its ``message`` field, else the body's text."""
        msg = fields.get("message")
        if isinstance(msg, str) and msg:
            return msg
        text = reply.body.decode("utf-8", errors="replace").strip()
        return text or "(empty body)"

    @staticmethod
    def _refused_param(fields: Mapping[str, Any], text: str, sent: Mapping[str, Any]) -> str | None:
        """The parameter a 400/422 refuses (OpenAI's ``param`` field, else a quoted name in an
        "unsupported ..." message), when it is one we sent and could send otherwise; else None."""
        low = text.lower()
        if not any(word in low for word in _UNSUPPORTED_WORDS):
            return None
        named = fields.get("param")
        candidates = [named] if isinstance(named, str) and named else re.findall(r"['\"`](\w+)['\"`]", text)
        for name in candidates:
            if name in sent and name in ADAPTABLE_PARAMS:
                return name
        return None

    async def _once(self, body: dict[str, Any], acct: _Account, fmt: str) -> Any:
        self._ensure()
        assert self._sem is not None
        async with self._sem:
            if self._refused is not None:  # another request of this run was refused for good: not sent
                raise JudgeCallError(self._refused.cause, self._refused.message) from None
            acct.calls += 1
            try:
                reply = await self._http.post(body)
            except TimedOut:
                raise _Retryable("timeout", f"no answer within {self.timeout:g}s") from None
            except ConnectFailed as exc:
                if not self._answered:
                    # nothing listens there (or the host is unknown): retrying only delays the news
                    where = _redact_url(self.base_url) if self.base_url else "https://api.openai.com/v1"
                    hint = ("if the server's certificate comes from a CA of your own, point SSL_CERT_FILE at that "
                            "CA's certificate" if "certificate" in exc.reason.lower()
                            else "is the server running, and is the base URL right?")
                    raise JudgeCallError(
                        "connection_refused",
                        f"{self.identity}: cannot connect to {where} ({self.scrub(exc.reason)}); {hint}",
                    ) from None
                raise _Retryable("connection", f"connection failed ({self.scrub(exc.reason)})") from None
            except Disconnected as exc:
                raise _Retryable("connection", f"connection failed ({exc.detail})") from None
            self._answered = True
        if not 200 <= reply.status < 300:
            self._status_error(reply, body, fmt)
        try:
            completion = reply.json()
        except ValueError as exc:  # not JSON, or not UTF-8
            raise _Retryable("server_error", f"bad response: the body is not JSON ({type(exc).__name__})") from None
        if not _has_choices(completion):
            raise _Retryable("server_error", "the response has no choices")
        acct.usage = acct.usage + usage_of(completion.get("usage"))
        return completion

    def _status_error(self, reply: HTTPReply, body: Mapping[str, Any], fmt: str) -> None:
        """Raise what an HTTP error status means: a retry (429, 408, 5xx), a refused parameter or
        format (400/422 naming it), else a JudgeCallError ``http_<status>``."""
        status = reply.status
        fields = self._error_fields(reply)
        text = self.scrub(self._error_text(reply, fields))[:500]
        retry_after = _parse_retry_after(reply.headers)
        if status == 429:
            raise _Retryable("rate_limited", f"HTTP 429: {text}", retry_after) from None
        if status == 408:
            raise _Retryable("timeout", f"HTTP 408: {text}", retry_after) from None
        param = self._refused_param(fields, text, body) if status in (400, 422) else None
        if param is not None:  # a reasoning model refusing max_tokens or temperature
            raise _ParamRejected(param, status, f"HTTP {status}: {text}") from None
        if fmt != "text" and status in (400, 422, 500, 501) and self._names_format(text):
            # llama.cpp answers 400 (older builds 500) when it cannot use the format
            raise _FormatRejected(status, f"HTTP {status}: {text}") from None
        if status >= 500:
            raise _Retryable("server_error", f"HTTP {status}: {text}", retry_after) from None
        raise JudgeCallError(f"http_{status}", f"{self.identity}: HTTP {status}: {text}") from None

    @staticmethod
    def _names_format(text: str) -> bool:
        low = text.lower()
        return any(word in low for word in _FORMAT_WORDS)

    async def _request(self, body: dict[str, Any], acct: _Account, fmt: str, prompt_id: str) -> Any:
        """One request with our retries; raises JudgeCallError (or _FormatRejected, _ParamRejected)."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
            sleep=asyncio.sleep,
        )
        try:
            return await retrying(self._once, body, acct, fmt)
        except JudgeCallError as exc:
            if exc.cause in FATAL_CAUSES and self._refused is None:
                self._refused = exc
            raise
        except _Retryable as exc:
            n = self.max_attempts
            raise JudgeCallError(
                exc.cause, f"{prompt_id} via {self.identity}: {exc.message} (gave up after {n} attempt{'s' * (n != 1)})"
            ) from None

    async def _send(self, request: CompletionRequest, fmt: str, acct: _Account) -> Any:
        """One request in format ``fmt``; a refused parameter is sent otherwise (renamed, or left
        out) and the request sent again, once per parameter. Raises JudgeCallError or
        _FormatRejected."""
        prompt_id = request.prompt.id
        while True:
            try:
                completion = await self._request(self.request_body(request, fmt), acct, fmt, prompt_id)
            except _ParamRejected as rej:
                if not self._adapt(rej.param):
                    message = f"{prompt_id} via {self.identity}: {rej.message}"
                    raise JudgeCallError(f"http_{rej.status}", message) from None
                continue
            self._confirm_params()
            return completion

    async def _fixed(self, request: CompletionRequest, fmt: str, acct: _Account, what: str) -> Any:
        """One request in format ``fmt``, no chain: a refusal is an ``http_<status>`` error."""
        prompt_id = request.prompt.id
        try:
            return await self._send(request, fmt, acct)
        except _FormatRejected as rej:
            message = f"{prompt_id} via {self.identity}: {what}{rej.message}"
            raise JudgeCallError(f"http_{rej.status}", message) from None

    async def _primary(self, request: CompletionRequest, acct: _Account) -> tuple[Any, str]:
        """Send the first-choice request, walking down the format chain on refusals. While the
        endpoint is not known yet (format, parameters), one task probes at a time."""
        self._ensure()
        assert self._probe_lock is not None
        if not self.known() and not self._probe_open:
            async with self._probe_lock:  # one task finds the format; the others then use it
                if not self.known() and not self._probe_open:
                    try:
                        return await self._walk_chain(request, acct)
                    except JudgeCallError:
                        # the endpoint fails for another reason: do not make every task wait
                        # for every other task's retries
                        self._probe_open = True
                        raise
        return await self._walk_chain(request, acct)

    async def _walk_chain(self, request: CompletionRequest, acct: _Account) -> tuple[Any, str]:
        if self.response_format != "auto":
            fixed: str = self.response_format
            return await self._fixed(request, fixed, acct, f"format {fixed} refused: "), fixed
        fmt = self.current_format()
        while True:
            try:
                completion = await self._send(request, fmt, acct)
            except _FormatRejected as rej:
                i = FORMAT_CHAIN.index(fmt)
                if i + 1 >= len(FORMAT_CHAIN):  # cannot happen: text sends no format
                    raise JudgeCallError(
                        f"http_{rej.status}", f"{request.prompt.id} via {self.identity}: {rej.message}"
                    ) from None
                fmt = FORMAT_CHAIN[i + 1]
                self._lower_format(fmt)
                continue
            self._confirm_format(fmt)
            return completion, fmt

    async def complete(self, request: CompletionRequest) -> Completion:
        """Send ``request`` (a repair in the format of the answer it repairs); the reply text,
        whether it was cut off, the calls and tokens it took, and the key fields of the format
        and parameters that answered. A failure raises JudgeCallError carrying the calls and
        tokens spent."""
        acct = _Account()
        try:
            if request.repair is not None and request.repair.key_fields is not None:
                fmt = self._format_of(request.repair.key_fields)
                completion = await self._fixed(request, fmt, acct, "")
            else:
                completion, fmt = await self._primary(request, acct)
        except JudgeCallError as exc:
            exc.calls, exc.usage = acct.calls, acct.usage
            raise
        text, truncated = completion_text(completion)
        return Completion(
            text=text,
            truncated=truncated,
            usage=acct.usage,
            calls=acct.calls,
            key_fields=self.key_fields(request, fmt),
        )


def _has_choices(completion: Any) -> bool:
    """Whether a chat completion body has a first choice with a message (text or not)."""
    if not isinstance(completion, Mapping):
        return False
    choices = completion.get("choices")
    return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], Mapping)
            and isinstance(choices[0].get("message", {}), (Mapping, type(None))))


def usage_of(usage: Any) -> Usage:
    """The :class:`Usage` of a completion's ``usage`` (an object or a dict; None: nothing):
    prompt and completion tokens, the reasoning tokens of
    ``completion_tokens_details.reasoning_tokens`` (a part of the completion tokens) and the cached
    prompt tokens of ``prompt_tokens_details.cached_tokens`` (a part of the prompt tokens)."""
    if usage is None:
        return Usage()

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    details = get(usage, "completion_tokens_details")
    reasoning = count(get(details, "reasoning_tokens")) if details is not None else 0
    prompt_details = get(usage, "prompt_tokens_details")
    cached = count(get(prompt_details, "cached_tokens")) if prompt_details is not None else 0
    return Usage(count(get(usage, "prompt_tokens")), count(get(usage, "completion_tokens")), reasoning, cached)


def completion_text(completion: Any) -> tuple[str | None, bool]:
    """The reply text of a chat completion (an object or a dict) and whether it was cut off
    (``finish_reason == "length"``)."""
    if isinstance(completion, Mapping):
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        return message.get("content"), choice.get("finish_reason") == "length"
    choice = completion.choices[0]
    text = getattr(choice.message, "content", None) if choice.message is not None else None
    return text, choice.finish_reason == "length"


class OpenAIJudge(JudgeCore):
    """The judge core (:class:`~judge_eval.judge.core.JudgeCore`) with an :class:`OpenAITransport`,
    built from one set of options.

    Parameters: ``model`` and the options of :class:`OpenAITransport`, plus ``cache`` (a :class:`ResponseCache`;
    None: no caching, no format memory across runs), ``temperature``, ``top_p``, ``seed``,
    ``max_tokens`` (decoding parameters, all part of the cache key; the seed sent for sample ``s``
    is ``seed + s``, so repeated samples can differ) and ``prompts`` (the prompt versions,
    :func:`~judge_eval.judge.prompts.select_prompts`).
    """

    transport: OpenAITransport

    def __init__(
        self,
        model: str,
        *,
        cache: ResponseCache | None = None,
        temperature: float = 0.0,
        top_p: float | None = None,
        seed: int | None = 0,
        max_tokens: int = 1024,
        prompts: PromptSelection = None,
        **transport: Any,
    ) -> None:
        """``transport``: the keyword options of :class:`OpenAITransport` (``base_url``,
        ``api_key``, ``timeout``, ``max_attempts``, ``concurrency``, ``namespace``,
        ``max_retry_wait``, ``retry_base_wait``, ``response_format``, ``reasoning_effort``,
        ``azure``, ``api_version``)."""
        super().__init__(
            OpenAITransport(model, cache=cache, **transport),
            cache=cache,
            prompts=prompts,
            decoding=Decoding(temperature=temperature, top_p=top_p, seed=seed, max_tokens=max_tokens),
            namespace=transport.get("namespace"),
        )

    def __repr__(self) -> str:
        return f"OpenAIJudge(identity={self.identity!r}, endpoint={self.endpoint!r})"

    @property
    def model(self) -> str:
        return self.transport.model

    @property
    def base_url(self) -> str | None:
        return self.transport.base_url

    @property
    def endpoint(self) -> str:
        """Base URL (no credentials) and model: the key of the remembered response format."""
        return self.transport.endpoint

    @property
    def retry_log(self) -> list[RetryEvent]:
        """Every backoff taken, in order."""
        return self.transport.retry_log

    def current_format(self) -> str:
        """The structured-output format the next request will try."""
        return self.transport.current_format()
