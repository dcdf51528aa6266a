"""A model kept compiled, answering generation requests over local HTTP (docs/generate.md).

Two conventions, one model. presk's own: `POST /generate` takes a JSON object
(`request_schema`) and answers `{"text", "tokens"}`, or with `"stream": true` the text as
a chunked `text/plain` stream, the prompt first. OpenAI's completions: `POST
/v1/completions` (`completion_schema`) answers a `text_completion` object, or with
`"stream": true` server-sent events, one `data: {…}` a piece of text and `data: [DONE]`
last; `GET /v1/models` lists the one model. `GET /health` answers `{"ok": true}`.

Every refusal is OpenAI's error object `{"error": {"message", "type", "param", "code"}}`,
the code presk's: E0005 (400, 404, 405, 411) for a request that is not one, or that asks
what the server does not do, E0006 (413) for a body over the limit, E0007 (429) when
`concurrency` generations already run (no queue). Each connection has a thread of its own
(the standard library's ThreadingHTTPServer); the model's calls are serialized by the
model, so the generations take turns token by token.
"""

from __future__ import annotations

import codecs
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from presk.generate import Model, Sampling
from presk.jsontext import first_violation, parse

MAX_DEPTH = 4  # a request is a flat object (a list of stops at most): deeper is refused unparsed
SECONDS = 30  # a client that sends nothing for this long is dropped
COMPLETION_TOKENS = 16  # OpenAI's default max_tokens
MAX_STOPS = 4  # OpenAI's limit on stop strings


@dataclass(frozen=True)
class Limits:
    request_bytes: int = 4096  # the body of a request, at most
    tokens: int = 512  # the tokens a request may ask, at most
    concurrency: int = 2  # generations at once; beyond, 429


SEED = {"type": "integer", "minimum": 0, "maximum": 2**64 - 1}


def request_schema(limits: Limits) -> dict:
    """A generation request: a prompt and how to sample its continuation."""
    return {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1},
            "tokens": {"type": "integer", "minimum": 1, "maximum": limits.tokens},
            "temperature": {"type": "number", "minimum": 0, "maximum": 1e300},
            "top_k": {"type": ["integer", "null"], "minimum": 1},
            "seed": SEED,
            "stream": {"type": "boolean"},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }


def completion_schema(limits: Limits) -> dict:
    """An OpenAI completion request: OpenAI's fields and ranges, a null for any of them
    its default; one prompt string, and tokens within the limit."""
    stop = {"type": "string", "minLength": 1}
    return {
        "type": "object",
        "properties": {
            "model": {"type": "string"},
            "prompt": {"type": "string", "minLength": 1},
            "max_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": limits.tokens},
            "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
            "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "n": {"type": ["integer", "null"], "minimum": 1},
            "stop": {
                "anyOf": [
                    {"type": "null"},
                    stop,
                    {"type": "array", "items": stop, "maxItems": MAX_STOPS},
                ]
            },
            "seed": {**SEED, "type": ["integer", "null"]},
            "stream": {"type": ["boolean", "null"]},
            "stream_options": {
                "type": ["object", "null"],
                "properties": {"include_usage": {"type": "boolean"}},
                "additionalProperties": False,
            },
            "best_of": {"type": ["integer", "null"], "minimum": 1},
            "echo": {"type": ["boolean", "null"]},
            "logprobs": {"type": ["integer", "null"], "minimum": 0, "maximum": 5},
            "frequency_penalty": {"type": ["number", "null"], "minimum": -2, "maximum": 2},
            "presence_penalty": {"type": ["number", "null"], "minimum": -2, "maximum": 2},
            "logit_bias": {"type": ["object", "null"]},
            "suffix": {"type": ["string", "null"]},
            "user": {"type": "string"},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }


# OpenAI's fields that ask for what presk does not do, taken at the value that does nothing
# (clients send them at their defaults): the values taken, and why no other is.
NEUTRAL = {
    "top_p": ((1,), "presk draws from every token: only top_p 1 is honoured"),
    "n": ((1,), "one completion a request"),
    "best_of": ((1,), "one completion a request"),
    "echo": ((False,), "the completion is answered without its prompt"),
    "logprobs": ((), "no log-probabilities are given"),
    "frequency_penalty": ((0,), "the logits are not penalized"),
    "presence_penalty": ((0,), "the logits are not penalized"),
    "logit_bias": (({},), "the logits are not biased"),
    "suffix": (("",), "no text is inserted"),
}


class Refused(Exception):
    """A request answered with an error: its HTTP status, code and message, and the
    request's field at fault (OpenAI's `param`) when there is one."""

    def __init__(self, status: HTTPStatus, code: str, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param

    def body(self) -> dict:
        """OpenAI's error object, the code presk's."""
        limited = self.status == HTTPStatus.TOO_MANY_REQUESTS
        return {
            "error": {
                "message": self.message,
                "type": "rate_limit_error" if limited else "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }


def sampling_of(request: dict, limits: Limits) -> Sampling:
    """The sampling a valid /generate request asks, its left-out fields Sampling's
    defaults (the tokens at most the limit)."""
    default = Sampling()
    return Sampling(
        request.get("tokens", min(default.tokens, limits.tokens)),
        request.get("temperature", default.temperature),
        request.get("top_k"),
        request.get("seed", default.seed),
    )


def completion_sampling(request: dict, limits: Limits) -> Sampling:
    """The sampling a valid completion request asks; a field left out or null takes
    OpenAI's default (16 tokens at most the limit, temperature 1), the seed 0."""
    default = Sampling()
    tokens = request.get("max_tokens")
    temperature = request.get("temperature")
    seed = request.get("seed")
    return Sampling(
        min(COMPLETION_TOKENS, limits.tokens) if tokens is None else tokens,
        default.temperature if temperature is None else temperature,
        None,
        default.seed if seed is None else seed,
    )


def check_completion(request: dict, model_name: str) -> None:
    """Refuses (E0005) a valid completion request that names another model (404, as
    OpenAI does) or asks for what the server does not do (400)."""
    named = request.get("model")
    if named is not None and named != model_name:
        raise Refused(
            HTTPStatus.NOT_FOUND,
            "E0005",
            f"the model {named!r} does not exist: this server has {model_name!r} (GET /v1/models)",
            "model",
        )
    for field, (taken, why) in NEUTRAL.items():
        value = request.get(field)
        if value is not None and value not in taken:
            raise Refused(
                HTTPStatus.BAD_REQUEST, "E0005", f"{field} {json.dumps(value)}: {why}", field
            )


def stops_of(request: dict) -> list[str]:
    """The stop strings of a valid completion request, none when left out or null."""
    stop = request.get("stop")
    return [] if stop is None else [stop] if isinstance(stop, str) else stop


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
        param = str(error.absolute_path[0]) if error.absolute_path else None
        raise Refused(HTTPStatus.BAD_REQUEST, "E0005", f"request{where}: {error.message}", param)
    return request


class Completion:
    """A completion's text in pieces as its tokens are drawn: their bytes decoded as UTF-8
    (a byte that is not, U+FFFD), cut before the first stop string. The text that may
    begin a stop string is held back until a later token settles it, so no piece sent is
    ever taken back. After `pieces`, `drawn` is the tokens drawn and `finish_reason`
    OpenAI's: "stop" at a stop string, else "length"."""

    def __init__(self, tokens: Iterator[tuple[int, bytes]], stops: list[str]):
        self.tokens = tokens
        self.stops = stops
        self.drawn = 0
        self.finish_reason = "length"

    def pieces(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text, sent = "", 0  # no stop string can start before `sent`: see `_held_back`
        for _, piece in self.tokens:
            self.drawn += 1
            text += decoder.decode(piece)
            cut = self._first_stop(text, sent)
            if cut is not None:
                self.finish_reason = "stop"
                if cut > sent:
                    yield text[sent:cut]
                return
            end = max(sent, len(text) - self._held_back(text))
            if end > sent:
                yield text[sent:end]
                sent = end
        text += decoder.decode(b"", final=True)
        cut = self._first_stop(text, sent)
        if cut is not None:
            self.finish_reason = "stop"
        end = len(text) if cut is None else cut
        if end > sent:
            yield text[sent:end]

    def _first_stop(self, text: str, start: int) -> int | None:
        found = [i for i in (text.find(s, start) for s in self.stops) if i >= 0]
        return min(found, default=None)

    def _held_back(self, text: str) -> int:
        """The length of the longest end of `text` that begins a stop string: only there
        may a stop string still appear."""
        return max(
            (k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])),
            default=0,
        )


class GenerationServer(ThreadingHTTPServer):
    """The HTTP server of one model, named `model_name` to OpenAI's clients; its handler
    answers from `model` within `limits`."""

    daemon_threads = True  # a generation still running does not hold the process at exit

    def __init__(self, address: tuple[str, int], model: Model, limits: Limits, model_name: str):
        super().__init__(address, Handler)
        self.model = model
        self.limits = limits
        self.model_name = model_name
        self.started = int(time.time())
        self.schemas = {
            "/generate": request_schema(limits),
            "/v1/completions": completion_schema(limits),
        }
        self.slots = threading.BoundedSemaphore(limits.concurrency)


class Handler(BaseHTTPRequestHandler):
    server: GenerationServer
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams
    server_version = "presk"
    timeout = SECONDS
    # An answer's head and body are two writes: with Nagle's algorithm the body would wait
    # for the client's delayed acknowledgement of the head, 40 ms on Linux; and each piece
    # of a stream is meant to leave at once.
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/health":
            return self._send_json(HTTPStatus.OK, {"ok": True})
        if self.path == "/v1/models":
            card = {
                "id": self.server.model_name,
                "object": "model",
                "created": self.server.started,
                "owned_by": "presk",
            }
            return self._send_json(HTTPStatus.OK, {"object": "list", "data": [card]})
        self._refuse(_no_such(self.command, self.path))

    def do_POST(self):
        try:
            schema = self.server.schemas.get(self.path)
            if schema is None:
                raise _no_such(self.command, self.path)
            request = read_request(self._body(), schema)
            if self.path == "/v1/completions":
                check_completion(request, self.server.model_name)
            prompt = _prompt_bytes(request["prompt"])
            if not self.server.slots.acquire(blocking=False):
                n = self.server.limits.concurrency
                raise Refused(HTTPStatus.TOO_MANY_REQUESTS, "E0007", f"{n} generations run already")
        except Refused as e:
            return self._refuse(e)
        try:
            if self.path == "/v1/completions":
                self._complete(prompt, request)
            else:
                self._generate(prompt, request)
        except (BrokenPipeError, ConnectionResetError):  # the client left: stop generating
            self.close_connection = True
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
        self._start_stream("text/plain; charset=utf-8")
        self._chunk(prompt)
        for _, piece in tokens:
            self._chunk(piece)
        self._chunk(b"")

    def _complete(self, prompt: bytes, request: dict) -> None:
        """OpenAI's text_completion for a checked request: one object, or its pieces as
        server-sent events, the last piece with the finish reason (and, when asked, one
        more with the usage and no choice), then [DONE]."""
        model = self.server.model
        prompt_tokens = len(model.vocabulary.encode(prompt))
        tokens = model.generate(prompt, completion_sampling(request, self.server.limits))
        completion = Completion(tokens, stops_of(request))
        head = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.server.model_name,
        }

        def choice(text: str, finish_reason: str | None) -> dict:
            return {"text": text, "index": 0, "logprobs": None, "finish_reason": finish_reason}

        def usage() -> dict:
            drawn = completion.drawn
            return {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": drawn,
                "total_tokens": prompt_tokens + drawn,
            }

        if not request.get("stream"):
            text = "".join(completion.pieces())
            answer = {**head, "choices": [choice(text, completion.finish_reason)], "usage": usage()}
            return self._send_json(HTTPStatus.OK, answer)
        with_usage = (request.get("stream_options") or {}).get("include_usage", False)
        no_usage = {"usage": None} if with_usage else {}
        self._start_stream("text/event-stream; charset=utf-8")
        for text in completion.pieces():
            self._event({**head, "choices": [choice(text, None)], **no_usage})
        self._event({**head, "choices": [choice("", completion.finish_reason)], **no_usage})
        if with_usage:
            self._event({**head, "choices": [], "usage": usage()})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _start_stream(self, content_type: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _event(self, value: dict) -> None:
        self._chunk(b"data: %s\n\n" % json.dumps(value, ensure_ascii=False).encode())

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _refuse(self, e: Refused) -> None:
        self._send_json(e.status, e.body())

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


def _prompt_bytes(prompt: str) -> bytes:
    try:
        return prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(
            HTTPStatus.BAD_REQUEST, "E0005", "the prompt holds a lone surrogate", "prompt"
        ) from None


ENDPOINTS = {
    "/generate": "POST",
    "/v1/completions": "POST",
    "/health": "GET",
    "/v1/models": "GET",
}


def _no_such(method: str, path: str) -> Refused:
    status = HTTPStatus.METHOD_NOT_ALLOWED if path in ENDPOINTS else HTTPStatus.NOT_FOUND
    known = ", ".join(f"{m} {p}" for p, m in ENDPOINTS.items())
    return Refused(status, "E0005", f"no {method} {path}: {known}")
