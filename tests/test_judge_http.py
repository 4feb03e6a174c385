"""The judge's HTTP (judge_eval.judge.http, aiohttp) against real servers on 127.0.0.1: the proxy of
the environment, the headers sent, error answers that are not OpenAI's JSON, the three kinds of
failure, and connections closed when a run's event loop ends."""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import logging
import socket
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

import judge_eval
from judge_eval.errors import JudgeCallError
from judge_eval.judge.http import ConnectFailed, Disconnected, JSONPoster, TimedOut, env_proxy
from judge_eval.judge.openai_judge import OpenAIJudge
from judge_eval.testing.scripted_server import Scenario, ScriptedServer
from tests.judge_helpers import mini_dataset, offline_scenario

SECRET = "sk-test-SECRET-http-42"
REFERENCE = "Water boils at 100 °C at sea level."
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def decompose(judge: OpenAIJudge, reference: str = REFERENCE):
    async def main():
        try:
            return await judge.decompose(reference)
        finally:
            await judge.aclose()

    return asyncio.run(main())


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1 with the handler class given, in a thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> _Server:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def forwarding_proxy(seen: list[str]) -> _Server:
    """A plain HTTP proxy: records each request line (absolute-form URL) and forwards the request."""

    class Proxy(_Quiet):
        def do_POST(self) -> None:
            seen.append(self.requestline)
            target = urlsplit(self.path)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "host")}
            conn.request("POST", target.path + (f"?{target.query}" if target.query else ""), body, headers)
            answer = conn.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

    return _Server(Proxy)


# -- the proxy of the environment ------------------------------------------------------------


def test_env_proxy_follows_the_scheme_all_proxy_and_no_proxy(no_proxy_env) -> None:
    env = no_proxy_env
    assert env_proxy("https://api.openai.com/v1/chat/completions") is None
    env.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.corp:3128"
    assert env_proxy("http://127.0.0.1:8080/v1/chat/completions") is None  # https_proxy is for https only
    env.setenv("ALL_PROXY", "http://all.corp:8080")
    assert env_proxy("http://127.0.0.1:8080/v1/chat/completions") == "http://all.corp:8080"
    env.setenv("NO_PROXY", "localhost,127.0.0.1,.internal")
    assert env_proxy("http://127.0.0.1:8080/v1/chat/completions") is None
    assert env_proxy("https://llm.internal/v1/chat/completions") is None
    assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy.corp:3128"


def test_requests_go_through_the_environment_proxy_unless_no_proxy_names_the_host(no_proxy_env) -> None:
    seen: list[str] = []
    with ScriptedServer(Scenario(decompositions={REFERENCE: [REFERENCE]})) as server, forwarding_proxy(seen) as proxy:
        no_proxy_env.setenv("HTTP_PROXY", proxy.url)
        resp = decompose(OpenAIJudge("m", base_url=server.base_url, api_key=SECRET))
        assert resp.value.statements == [REFERENCE]
        assert seen == [f"POST {server.base_url}/chat/completions HTTP/1.1"]  # absolute form: a proxy request
        assert len(server.requests) == 1

        no_proxy_env.setenv("NO_PROXY", "127.0.0.1")
        decompose(OpenAIJudge("m2", base_url=server.base_url, api_key=SECRET))
        assert len(seen) == 1 and len(server.requests) == 2  # straight to the server


# -- what is sent ------------------------------------------------------------------------------


def test_headers_as_the_openai_sdk_sends_them(no_proxy_env) -> None:
    no_proxy_env.setenv("OPENAI_ORG_ID", "org-abc")
    no_proxy_env.setenv("OPENAI_PROJECT_ID", "proj_xyz")
    with ScriptedServer(Scenario(decompositions={REFERENCE: [REFERENCE]})) as server:
        decompose(OpenAIJudge("m", base_url=server.base_url, api_key=SECRET))
        (request,) = server.requests
    headers = request["headers"]
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert headers["openai-organization"] == "org-abc" and headers["openai-project"] == "proj_xyz"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"].startswith("judge-eval/")
    assert request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "m" and request["body"]["response_format"]["type"] == "json_schema"


def test_repr_and_errors_never_show_the_key(no_proxy_env) -> None:
    poster = JSONPoster("http://127.0.0.1:9/v1/chat/completions", {"Authorization": f"Bearer {SECRET}"},
                        timeout=1, limit=1)
    assert SECRET not in repr(poster) and SECRET not in str(vars(poster).get("url"))


# -- answers that are not OpenAI's ------------------------------------------------------------


def _answering(status: int, body: bytes, content_type: str = "text/plain") -> type[BaseHTTPRequestHandler]:
    class Handler(_Quiet):
        hits = 0

        def do_POST(self) -> None:
            type(self).hits += 1
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def test_an_error_body_that_is_not_json_is_the_message() -> None:
    handler = _answering(400, b"upstream says: model name is wrong")
    with _Server(handler) as srv:
        with pytest.raises(JudgeCallError) as err:
            decompose(OpenAIJudge("m", base_url=srv.url + "/v1", api_key=SECRET, response_format="text"))
    assert err.value.cause == "http_400"
    assert "HTTP 400: upstream says: model name is wrong" in str(err.value)
    assert handler.hits == 1  # a 400 is not retried


def test_an_openai_error_body_gives_its_message_and_param() -> None:
    body = json.dumps({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model.",
                                 "type": "invalid_request_error", "param": "max_tokens"}}).encode()

    class Handler(_Quiet):
        bodies: list[dict] = []

        def do_POST(self) -> None:
            sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            type(self).bodies.append(sent)
            if "max_tokens" in sent:
                data, status = body, 400
            else:
                content = json.dumps({"statements": [REFERENCE]})
                data, status = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": content}}], "usage": {"prompt_tokens": 5,
                                                                        "completion_tokens": 3}}).encode(), 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with _Server(Handler) as srv:
        resp = decompose(OpenAIJudge("m", base_url=srv.url + "/v1", api_key=SECRET))
    assert resp.value.statements == [REFERENCE]
    assert ["max_tokens" in b for b in Handler.bodies] == [True, False]
    assert "max_completion_tokens" in Handler.bodies[1]  # renamed, as the error's param asked


def test_a_200_that_is_not_json_is_retried_then_reported() -> None:
    handler = _answering(200, b"<html>gateway login</html>", "text/html")
    with _Server(handler) as srv:
        with pytest.raises(JudgeCallError) as err:
            decompose(OpenAIJudge("m", base_url=srv.url + "/v1", api_key=SECRET, max_attempts=3,
                                  retry_base_wait=0.001, response_format="text"))
    assert err.value.cause == "server_error" and "not JSON" in str(err.value)
    assert handler.hits == 3 and err.value.calls == 3


# -- TLS --------------------------------------------------------------------------------------


def _self_signed(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key (PEM files), made with the openssl command."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
                    "-out", str(cert), "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_https_is_verified_against_ssl_cert_file_and_an_unknown_certificate_fails_at_once(
        tmp_path, no_proxy_env) -> None:
    import ssl

    cert, key = _self_signed(tmp_path)
    answer = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": json.dumps({"statements": [REFERENCE]})}}]}).encode()
    server = _Server(_answering(200, answer, "application/json"))
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.httpd.socket = tls.wrap_socket(server.httpd.socket, server_side=True)
    url = f"https://127.0.0.1:{server.port}/v1"
    with server:
        with pytest.raises(JudgeCallError) as err:  # a certificate nobody vouches for
            decompose(OpenAIJudge("m", base_url=url, api_key=SECRET))
        assert err.value.cause == "connection_refused" and err.value.calls == 1
        assert "certificate verify failed" in str(err.value) and "point SSL_CERT_FILE at that CA's" in str(err.value)
        no_proxy_env.setenv("SSL_CERT_FILE", cert)  # as with the openai SDK: trust this one
        assert decompose(OpenAIJudge("m", base_url=url, api_key=SECRET)).value.statements == [REFERENCE]


# -- the three failures ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(poster: JSONPoster):
    async def main():
        try:
            return await poster.post({"x": 1})
        finally:
            await poster.aclose()

    return asyncio.run(main())


def test_poster_failures_are_its_own_three_exceptions() -> None:
    with pytest.raises(ConnectFailed) as refused:
        _post(JSONPoster(f"http://127.0.0.1:{_free_port()}/v1/chat/completions", {}, timeout=2, limit=1))
    assert refused.value.reason == "connection refused"

    class Closer(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.connection.shutdown(socket.SHUT_RDWR)  # no status line at all

    with _Server(Closer) as srv, pytest.raises(Disconnected):
        _post(JSONPoster(srv.url + "/v1/chat/completions", {}, timeout=2, limit=1))

    release = threading.Event()

    class Hang(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            release.wait(10)

    with _Server(Hang) as srv:
        try:
            with pytest.raises(TimedOut):
                _post(JSONPoster(srv.url + "/v1/chat/completions", {}, timeout=0.3, limit=1))
        finally:
            release.set()

    with _Server(_answering(418, b"teapot")) as srv:
        reply = _post(JSONPoster(srv.url + "/v1/chat/completions", {}, timeout=2, limit=1))
    assert (reply.status, reply.body, reply.headers["content-type"]) == (418, b"teapot", "text/plain")


# -- connections closed when the run's loop ends ----------------------------------------------


def test_evaluate_closes_its_connections_and_the_judge_works_for_the_next_run(caplog) -> None:
    ds = mini_dataset(3, runs=("bm25",))
    with ScriptedServer(offline_scenario(ds, 3)) as server:
        judge = OpenAIJudge("m", base_url=server.base_url, api_key=SECRET)
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, logger="asyncio"):
            warnings.simplefilter("always")
            first = judge_eval.evaluate(ds, judge=judge, ks=(3,))
            second = judge_eval.evaluate(ds, judge=judge, ks=(3,))  # a new loop: new connections
            gc.collect()
        # no cache: the second run asks everything again, through connections of its own loop
        assert first.accounting.calls == second.accounting.calls > 0
        assert len(server.requests) == 2 * first.accounting.calls
        del judge
        gc.collect()
    unclosed = [str(w.message) for w in caught if "nclosed" in str(w.message)]
    assert unclosed == [] and "nclosed" not in caplog.text


def test_a_judge_used_in_the_callers_own_asyncio_runs_leaves_no_unclosed_connection(caplog) -> None:
    # no aclose(): asyncio.run() finalizes the loop's async generators, and the judge's closes
    # its session then
    with ScriptedServer(Scenario(decompositions={REFERENCE: [REFERENCE]})) as server:
        judge = OpenAIJudge("m", base_url=server.base_url, api_key=SECRET)
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, logger="asyncio"):
            warnings.simplefilter("always")
            for _ in range(3):
                assert asyncio.run(judge.decompose(REFERENCE)).value.statements == [REFERENCE]
            del judge
            gc.collect()
        assert len(server.requests) == 3
    assert [str(w.message) for w in caught if "nclosed" in str(w.message)] == []
    assert "nclosed" not in caplog.text
