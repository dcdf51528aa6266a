"""A model kept compiled, answering generation requests over local HTTP (docs/generate.md).

`POST /generate` takes a JSON object (REQUEST) and answers `{"text", "tokens"}`, or with
`"stream": true` the text as a chunked `text/plain` stream, the prompt first. `GET
/health` answers `{"ok": true}`. Every refusal is a JSON object `{"error": {"code",
"message"}}`: E0005 (400, 404, 405, 411) for a request that is not one, E0006 (413) for a
body over the limit, E0007 (429) when `concurrency` generations already run (no queue).
Each connection has a thread of its own (the standard library's ThreadingHTTPServer); the
model's calls are serialized by the model, so the generations take turns token by token.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from presk.generate import Model, Sampling
from presk.jsontext import first_violation, parse

MAX_DEPTH = 4  # a request is one flat object: deeper nesting is refused before parsing
SECONDS = 30  # a client that sends nothing for this long is dropped


@dataclass(frozen=True)
class Limits:
    request_bytes: int = 4096  # the body of a request, at most
    tokens: int = 512  # the tokens a request may ask, at most
    concurrency: int = 2  # generations at once; beyond, 429


def request_schema(limits: Limits) -> dict:
    """A generation request: a prompt and how to sample its continuation."""
    return {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1},
            "tokens": {"type": "integer", "minimum": 1, "maximum": limits.tokens},
            "temperature": {"type": "number", "minimum": 0, "maximum": 1e300},
            "top_k": {"type": ["integer", "null"], "minimum": 1},
            "seed": {"type": "integer", "minimum": 0, "maximum": 2**64 - 1},
            "stream": {"type": "boolean"},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }


class Refused(Exception):
    """A request answered with an error: its HTTP status, code and message."""

    def __init__(self, status: HTTPStatus, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def sampling_of(request: dict, limits: Limits) -> Sampling:
    """The sampling a valid request asks, its left-out fields Sampling's defaults (the
    tokens at most the limit)."""
    default = Sampling()
    return Sampling(
        request.get("tokens", min(default.tokens, limits.tokens)),
        request.get("temperature", default.temperature),
        request.get("top_k"),
        request.get("seed", default.seed),
    )


def read_request(body: bytes, schema: dict) -> dict:
    """The request a body holds, refused (E0005) unless UTF-8 JSON against `schema`."""
    try:
        request = parse(body.decode("utf-8"), MAX_DEPTH)
    except UnicodeDecodeError:
        raise Refused(HTTPStatus.BAD_REQUEST, "E0005", "the body is not UTF-8 text") from None
    except ValueError as e:
        raise Refused(HTTPStatus.BAD_REQUEST, "E0005", f"the body: {e}") from None
    error = first_violation(request, schema)
    if error is not None:
        where = "".join(f"[{p!r}]" for p in error.absolute_path)
        raise Refused(HTTPStatus.BAD_REQUEST, "E0005", f"request{where}: {error.message}")
    return request


class GenerationServer(ThreadingHTTPServer):
    """The HTTP server of one model; its handler answers from `model` within `limits`."""

    daemon_threads = True  # a generation still running does not hold the process at exit

    def __init__(self, address: tuple[str, int], model: Model, limits: Limits):
        super().__init__(address, Handler)
        self.model = model
        self.limits = limits
        self.schema = request_schema(limits)
        self.slots = threading.BoundedSemaphore(limits.concurrency)


class Handler(BaseHTTPRequestHandler):
    server: GenerationServer
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams
    server_version = "presk"
    timeout = SECONDS

    def do_GET(self):
        if self.path != "/health":
            return self._refuse(_no_such(self.command, self.path))
        self._send_json(HTTPStatus.OK, {"ok": True})

    def do_POST(self):
        try:
            if self.path != "/generate":
                raise _no_such(self.command, self.path)
            request = read_request(self._body(), self.server.schema)
            try:
                prompt = request["prompt"].encode("utf-8")
            except UnicodeEncodeError:
                raise Refused(
                    HTTPStatus.BAD_REQUEST, "E0005", "the prompt holds a lone surrogate"
                ) from None
            if not self.server.slots.acquire(blocking=False):
                n = self.server.limits.concurrency
                raise Refused(HTTPStatus.TOO_MANY_REQUESTS, "E0007", f"{n} generations run already")
        except Refused as e:
            return self._refuse(e)
        try:
            self._generate(prompt, request)
        finally:
            self.server.slots.release()

    def _body(self) -> bytes:
        """The request's body, refused before it is read if it has no length (411) or is
        over the limit (413); the connection is closed after such a refusal."""
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None or not length.isdigit():
            self.close_connection = True
            raise Refused(HTTPStatus.LENGTH_REQUIRED, "E0005", "give the body's Content-Length")
        limit = self.server.limits.request_bytes
        if int(length) > limit:
            self.close_connection = True
            raise Refused(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                "E0006",
                f"the body has {length} bytes, over the limit of {limit}",
            )
        try:
            return self.rfile.read(int(length))
        except TimeoutError:
            self.close_connection = True
            raise Refused(
                HTTPStatus.REQUEST_TIMEOUT, "E0005", f"no body within {SECONDS} s"
            ) from None

    def _generate(self, prompt: bytes, request: dict) -> None:
        tokens = self.server.model.generate(prompt, sampling_of(request, self.server.limits))
        if not request.get("stream"):
            drawn = list(tokens)
            text = (prompt + b"".join(b for _, b in drawn)).decode("utf-8", errors="replace")
            return self._send_json(HTTPStatus.OK, {"text": text, "tokens": [t for t, _ in drawn]})
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._chunk(prompt)
            for _, piece in tokens:
                self._chunk(piece)
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):  # the client left: stop generating
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _refuse(self, e: Refused) -> None:
        self._send_json(e.status, {"error": {"code": e.code, "message": e.message}})

    def _send_json(self, status: HTTPStatus, value: dict) -> None:
        body = (json.dumps(value, ensure_ascii=False) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def send_error(self, code, message=None, explain=None):
        """The standard library's refusals (a malformed request line, an unknown method,
        headers too long) as JSON errors too."""
        self.close_connection = True
        what = message or HTTPStatus(code).phrase
        self._refuse(Refused(HTTPStatus(code), "E0005", what))


def _no_such(method: str, path: str) -> Refused:
    known = {"/generate": "POST", "/health": "GET"}
    status = HTTPStatus.METHOD_NOT_ALLOWED if path in known else HTTPStatus.NOT_FOUND
    return Refused(status, "E0005", f"no {method} {path}: POST /generate, GET /health")
