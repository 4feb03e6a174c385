"""POST a JSON body and read the reply: the HTTP under the OpenAI-compatible transport.

One :class:`JSONPoster` per endpoint URL, with an aiohttp session per event loop (made on the
first request in each loop: connections belong to one loop). aiohttp is used directly, not
through the openai SDK, because the SDK's request path (its request options, the httpx client and
httpcore below it) cost about 2 ms of CPU per request, eight times aiohttp's C-parsed HTTP/1.1
(``bench/bench_client.py``); the SDK is still what the Batch API's files and batches go through.

What it does: keep-alive connections (at most ``limit``), the proxy of ``HTTPS_PROXY`` /
``HTTP_PROXY`` / ``ALL_PROXY`` unless ``NO_PROXY`` exempts the host (read once per session, as
:func:`urllib.request.getproxies` reads them), redirects followed like httpx (a 301/302/303
answer to a POST becomes a GET), gzip/deflate answers decoded, TLS verified against
:func:`tls_context`, a read timeout (``timeout`` seconds from the request sent to the first byte
of the answer, and between bytes) and a connect timeout of the same length. What it does not do:
retries (the transport's, with its own policy) and parsing (the reply's bytes are given back as
they came).

Failures are raised as three exceptions of this module, so the caller needs no aiohttp:
:class:`ConnectFailed` (no connection could be opened: refused, unknown host, TLS),
:class:`Disconnected` (the connection broke during the exchange) and :class:`TimedOut`.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.request
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import aiohttp

__all__ = ["ConnectFailed", "Disconnected", "HTTPReply", "JSONPoster", "TimedOut"]


class ConnectFailed(Exception):
    """No connection could be opened (``reason``: e.g. "connection refused", a DNS or TLS error)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Disconnected(Exception):
    """The connection broke after it was opened (``detail``: the kind of break)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class TimedOut(Exception):
    """No answer (or no connection) within the timeout."""


@dataclass(frozen=True)
class HTTPReply:
    """An HTTP answer: status, headers (case-insensitive ``get``) and the body's bytes."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not JSON (``json.JSONDecodeError`` or
        ``UnicodeDecodeError``, both ValueErrors)."""
        return json.loads(self.body)


class JSONPoster:
    """POSTs JSON bodies to one URL with fixed headers.

    ``headers`` may hold a credential: they are kept on this object only (not in its repr), and
    never put in an exception message.
    """

    def __init__(self, url: str, headers: Mapping[str, str], *, timeout: float, limit: int) -> None:
        self.url = url
        self.__headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self.timeout = timeout
        self.limit = limit
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proxy: str | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    def __repr__(self) -> str:
        return f"JSONPoster(url={self.url!r})"

    def _ensure(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            import aiohttp  # on the first request: a run whose answers are all cached never imports it

            # A session of an earlier loop cannot be closed from this one; it is dropped.
            # trust_env stays off: aiohttp would then look up the proxy in a thread on every
            # request, and a ~/.netrc entry for the host would clash with our Authorization header.
            tls = tls_context() if self.url.startswith("https:") else True
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.limit, ssl=tls),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=self.timeout),
            )
            self._proxy = env_proxy(self.url)
            self._loop = loop
            self._closer = None
        return self._session

    async def post(self, body: Mapping[str, Any]) -> HTTPReply:
        """POST ``body`` as JSON; the answer, whatever its status. Raises ConnectFailed,
        Disconnected or TimedOut."""
        import aiohttp

        session = self._ensure()
        if self._closer is None:
            # Close the session when its loop shuts down, for callers that never call aclose():
            # asyncio.run() (and Runner.close()) finalize the loop's async generators before
            # closing it, and this one closes the session then; without it the connections of a
            # finished loop are left to the garbage collector, which logs "Unclosed connector".
            self._closer = _close_at_shutdown(session)
            await self._closer.__anext__()
        data = json.dumps(body, separators=(",", ":")).encode()
        try:
            async with session.post(self.url, data=data, headers=self.__headers, proxy=self._proxy) as resp:
                raw = await resp.read()
                return HTTPReply(resp.status, resp.headers, raw)
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise TimedOut() from None
        except aiohttp.ClientConnectorError as exc:
            raise ConnectFailed(_connect_reason(exc)) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise Disconnected(type(exc).__name__) from None

    async def aclose(self) -> None:
        """Close the connections (a session of another, closed loop is just dropped)."""
        session, loop, closer = self._session, self._loop, self._closer
        self._session, self._loop, self._closer = None, None, None
        if session is not None and loop is asyncio.get_running_loop():
            if closer is not None:
                await closer.aclose()  # closes the session
            await session.close()


async def _close_at_shutdown(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Suspended once started; closes ``session`` when finalized (``aclose()``)."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


def _connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    """A short reason for a failed connect: "connection refused", else the OS error's text."""
    os_error = exc.os_error
    if isinstance(os_error, ConnectionRefusedError):
        return "connection refused"
    return os_error.strerror or str(os_error) or type(os_error).__name__


def tls_context() -> ssl.SSLContext:
    """The certificates an ``https`` endpoint is verified against: ``SSL_CERT_FILE`` and/or
    ``SSL_CERT_DIR`` when set (as the openai SDK's HTTP client reads them), else the system's
    store together with certifi's bundle when certifi is installed (it comes with the openai
    SDK): a slim container without CA certificates still reaches api.openai.com, and a company
    CA installed in the system store is still trusted."""
    cafile, capath = os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
    if cafile or capath:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    ctx = ssl.create_default_context()
    try:
        import certifi
    except ImportError:  # pragma: no cover - certifi comes with the openai SDK
        return ctx
    ctx.load_verify_locations(cafile=certifi.where())
    return ctx


def env_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``<scheme>_proxy``, else ``all_proxy``, in
    either case; none when ``no_proxy`` matches the host), or None."""
    proxies = urllib.request.getproxies()
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    if not proxy or (host and urllib.request.proxy_bypass(host)):
        return None
    return proxy
