"""A loopback HTTP proxy in front of a real server, for fault injection: it answers the first requests with the
planned faults (429 with Retry-After, 503, a dropped connection, an answer held back until the client gives up),
checks an API key, refuses requests that carry a given field, can delay every answer by a fixed time (the
concurrency benchmark), can put planned answers in place of the real server's first ones (a malformed answer,
then a good one: the repair round) can strip fields the server refuses from requests (`strip_fields`), and can rewrite the real server's answers (`rewrite(request, response) ->
response`, on the decoded JSON of a chat completion: a model whose answers the test decides, or a response in a format the server cannot make, such as logprobs). Hostile
answers, for the client's bounds: a 307 redirect to another origin (`redirect_to`), a 16 MB answer, the real answer sent
one byte at a time until the client gives up (`sent` counts the bytes it got), a 200 whose body is an error object.
Everything else goes to the real server and back unchanged."""

from __future__ import annotations

import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlparse

FAULTS = ("429", "503", "drop", "slow", "redirect", "huge", "trickle", "error200")


class LoopbackServer:
    """A test's own HTTP server on 127.0.0.1 at a free port, each request answered in a thread of its own by the
    class `handler()` returns; `with` starts it and shuts it down. `url` is its address, `path` after it."""

    path = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def __enter__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


class FaultProxy:
    """`with FaultProxy(upstream, faults=["429", "drop"]) as proxy:` then send requests to `proxy.url`.

    `faults` are used one per request, in order of arrival; `answers` likewise, one per chat completion the real
    server answered: its message's content is replaced by the planned text (None: left as it is). `requests` logs what
    each request got, with the role and text of its last two messages."""

    def __init__(self, upstream: str, faults: list[str] = (), delay: float = 0.0,
                 key: str | None = None, refuse_field: str | None = None, retry_after: str = "1", port: int = 0,
                 answers: list[str | None] = (), rewrite: Callable[[dict, dict], dict] | None = None,
                 strip_fields: tuple[str, ...] = (), redirect_to: str | None = None):
        assert all(f in FAULTS for f in faults), faults
        self.upstream = urlparse(upstream)
        self.faults, self.delay, self.key = list(faults), delay, key
        self.answers = list(answers)
        self.refuse_field, self.retry_after, self.port = refuse_field, retry_after, port
        self.rewrite = rewrite
        self.strip_fields = strip_fields
        self.redirect_to = redirect_to
        self.sent = 0  # bytes of a trickled answer the client received before it gave up
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "FaultProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                proxy.handle(self)

            def do_POST(self):
                proxy.handle(self)

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        try:
            body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        except ConnectionError:  # the client gave up while sending
            h.close_connection = True
            return None
        fields = json.loads(body) if body else {}
        with self.lock:
            fault = self.faults.pop(0) if self.faults else None
            self.requests.append({"path": h.path, "fault": fault, "fields": sorted(fields),
                                  "authorization": h.headers.get("Authorization"),
                                  "last_messages": [(m["role"], m["content"] if isinstance(m["content"], str) else None)
                                                    for m in fields.get("messages", [])[-2:]],
                                  "body": fields})
        if self.key is not None and h.headers.get("Authorization") != f"Bearer {self.key}":
            return self.answer(h, 401, {"error": "invalid API key"})
        if self.refuse_field and self.refuse_field in fields:
            return self.answer(h, 400, {"error": f"{self.refuse_field} is not supported by this server"})
        if fault == "429":
            return self.answer(h, 429, {"error": "rate limited"}, {"Retry-After": self.retry_after})
        if fault == "503":
            return self.answer(h, 503, {"error": "overloaded"})
        if fault == "drop":
            h.close_connection = True  # no answer: the client sees the connection closed
            return None
        if fault == "redirect":
            return self.answer(h, 307, b"", {"Location": self.redirect_to + h.path})
        if fault == "error200":
            return self.answer(h, 200, {"error": {"message": "the model's worker crashed", "code": 500}})
        if fault == "huge":
            content = "x" * (16 * 2**20)
            return self.answer(h, 200, {"choices": [{"message": {"role": "assistant", "content": content}}]})
        if self.strip_fields and fields:
            body = json.dumps({k: v for k, v in fields.items() if k not in self.strip_fields}).encode()
        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port)
        upstream.request(h.command, h.path, body or None, {"Content-Type": "application/json"})
        response = upstream.getresponse()
        data = response.read()
        upstream.close()
        if response.status == 200 and h.path.endswith("/chat/completions"):
            with self.lock:
                planned = self.answers.pop(0) if self.answers else None
            if planned is not None:
                reply = json.loads(data)
                reply["choices"][0]["message"]["content"] = planned
                data = json.dumps(reply).encode()
        if self.rewrite is not None and response.status == 200 and h.path.endswith("/chat/completions"):
            data = json.dumps(self.rewrite(fields, json.loads(data))).encode()
        if fault == "slow":
            return self.hold_until_closed(h)
        if fault == "trickle":
            return self.trickle(h, data)
        time.sleep(self.delay)
        return self.answer(h, response.status, data)

    @staticmethod
    def hold_until_closed(h: BaseHTTPRequestHandler) -> None:
        """No answer until the client closes the connection (its timeout gave up): an event, not a fixed wait."""
        h.connection.settimeout(None)
        try:
            while h.connection.recv(1):  # the client sends nothing more; b"" is its close
                pass
        except OSError:
            pass
        h.close_connection = True

    def trickle(self, h: BaseHTTPRequestHandler, data: bytes) -> None:
        """The answer's headers, then its body one byte at a time until the client closes the connection."""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        try:
            for i in range(len(data)):
                h.wfile.write(data[i:i + 1])
                h.wfile.flush()
                self.sent = i + 1
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass
        h.close_connection = True

    @staticmethod
    def answer(h: BaseHTTPRequestHandler, status: int, data: bytes | dict, headers: dict | None = None) -> None:
        payload = data if isinstance(data, bytes) else json.dumps(data).encode()
        try:
            h.send_response(status)
            for name, value in {"Content-Type": "application/json", "Content-Length": str(len(payload)),
                                **(headers or {})}.items():
                h.send_header(name, value)
            h.end_headers()
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up on a held answer
            h.close_connection = True
