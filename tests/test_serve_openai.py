"""`presk serve` speaks OpenAI's completions: `POST /v1/completions` answers `presk
generate`'s continuation as a text_completion, cut at a stop string, streamed as
server-sent events that a line-reading client and curl take; `GET /v1/models` lists the
model; what the server cannot honour is refused in OpenAI's error shape. And the
completion's text cut at stop strings piece by piece, without a server."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess

import pytest
from test_generate import generated
from test_serve import post, served_model  # noqa: F401 (the fixture `server`)

from presk.serve import Completion

PROMPT = "The Software"
REQUEST = {"prompt": PROMPT, "max_tokens": 16, "seed": 5, "temperature": 0.9}
SAME = ["--prompt", PROMPT, "--tokens", "16", "--seed", "5", "--temperature", "0.9"]


def complete(server, request: dict) -> dict:
    status, body = post(server, request, "/v1/completions")
    assert status == 200, body
    return json.loads(body)


def refusal(server, request: dict) -> tuple[int, dict]:
    status, body = post(server, request, "/v1/completions")
    return status, json.loads(body)["error"]


def events(response: http.client.HTTPResponse) -> list[dict]:
    """The events of a server-sent stream, read line by line as a client reads them:
    `data: {…}` and a blank line each, up to `data: [DONE]`, after which the stream ends."""
    got = []
    while (line := response.readline()) != b"data: [DONE]\n":
        assert line.startswith(b"data: {") and line.endswith(b"}\n"), line
        got.append(json.loads(line[len(b"data: ") :]))
        assert response.readline() == b"\n"
    assert response.readline() == b"\n" and response.read() == b""
    return got


def streamed(server, request: dict) -> tuple[str, list[dict]]:
    """The content type and events of a streamed completion, the connection then reused."""
    host, port, _ = server
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request("POST", "/v1/completions", json.dumps({**request, "stream": True}))
        response = conn.getresponse()
        assert response.status == 200
        got = events(response)
        conn.request("GET", "/health")  # keep-alive: the stream ended where it said
        assert json.loads(conn.getresponse().read()) == {"ok": True}
        return response.headers["Content-Type"], got
    finally:
        conn.close()


def continuation(server) -> str:
    """`presk generate`'s text for REQUEST, without its prompt."""
    text = generated(server[2], *SAME, "--backend", "kernel")["text"]
    assert text.startswith(PROMPT)
    return text[len(PROMPT) :]


def test_a_completion_is_the_continuation_presk_generate_draws(server):
    answer = complete(server, REQUEST)
    assert answer["id"].startswith("cmpl-") and isinstance(answer["created"], int)
    assert (answer["object"], answer["model"]) == ("text_completion", server[2])
    choice = {"text": continuation(server), "index": 0, "logprobs": None}
    assert answer["choices"] == [{**choice, "finish_reason": "length"}]
    assert answer["usage"] == {"prompt_tokens": 12, "completion_tokens": 16, "total_tokens": 28}
    # the model's name, as GET /v1/models gives it, is taken; the neutral values too
    _, listed = get_json(server, "/v1/models")
    assert [m["id"] for m in listed["data"]] == [server[2]] and listed["object"] == "list"
    neutral = {"top_p": 1, "n": 1, "best_of": 1, "echo": False, "logprobs": None}
    neutral |= {"frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {}, "user": "u"}
    again = complete(server, {**REQUEST, "model": listed["data"][0]["id"], **neutral})
    assert again["choices"] == answer["choices"] and again["id"] != answer["id"]


def get_json(server, path: str) -> tuple[int, dict]:
    host, port, _ = server
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_a_stop_string_ends_the_completion_before_it(server):
    text = continuation(server)
    stop = text[5:7]
    cut = text.index(stop)
    answer = complete(server, {**REQUEST, "stop": ["never in it", stop]})
    assert answer["choices"][0]["text"] == text[:cut]
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] < 16  # no token drawn after the stop
    _, got = streamed(server, {**REQUEST, "stop": stop})
    assert "".join(e["choices"][0]["text"] for e in got) == text[:cut]
    assert got[-1]["choices"][0]["finish_reason"] == "stop"


def test_a_streaming_client_reads_the_completion_as_server_sent_events(server):
    whole = complete(server, REQUEST)
    request = {**REQUEST, "stream_options": {"include_usage": True}}
    content_type, got = streamed(server, request)
    assert content_type.startswith("text/event-stream")
    *pieces, last, usage = got
    assert len({e["id"] for e in got}) == 1 and all(e["object"] == "text_completion" for e in got)
    assert all(e["choices"][0]["finish_reason"] is None for e in pieces) and len(pieces) > 1
    assert "".join(e["choices"][0]["text"] for e in pieces) == whole["choices"][0]["text"]
    assert last["choices"] == [
        {"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}
    ]
    assert all(e["usage"] is None for e in [*pieces, last])
    assert usage["choices"] == [] and usage["usage"] == whole["usage"]
    _, plain = streamed(server, REQUEST)  # no usage asked: no usage key, no usage event
    assert [e["choices"] for e in plain] == [e["choices"] for e in [*pieces, last]]
    assert not any("usage" in e for e in plain)


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl")
def test_curl_gets_a_completion_a_stream_and_the_models(server):
    host, port, weights = server
    url = f"http://{host}:{port}"

    def curl(*args: str) -> str:
        proc = subprocess.run(
            ["curl", "-sS", "--fail-with-body", *args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc.stdout

    body = json.dumps({**REQUEST, "model": weights})
    header = ["-H", "Content-Type: application/json"]
    answer = json.loads(curl(f"{url}/v1/completions", *header, "-d", body))
    assert answer["choices"][0]["text"] == continuation(server)
    stream = curl(
        "-N", f"{url}/v1/completions", *header, "-d", json.dumps({**REQUEST, "stream": True})
    )
    chunks = stream.split("\n\n")
    assert chunks[-2:] == ["data: [DONE]", ""]
    texts = [json.loads(c.removeprefix("data: "))["choices"][0]["text"] for c in chunks[:-2]]
    assert "".join(texts) == answer["choices"][0]["text"]
    assert json.loads(curl(f"{url}/v1/models"))["data"][0]["id"] == weights


@pytest.mark.parametrize(
    ("field", "value", "status"),
    [
        ("top_p", 0.9, 400),
        ("n", 2, 400),
        ("best_of", 3, 400),
        ("echo", True, 400),
        ("logprobs", 1, 400),
        ("presence_penalty", 0.5, 400),
        ("logit_bias", {"5": 10}, 400),
        ("model", "gpt-3.5-turbo-instruct", 404),
        ("prompt", ["two", "prompts"], 400),
        ("prompt", "", 400),
        ("max_tokens", 513, 400),  # the server's limit, 512
        ("temperature", 2.5, 400),  # OpenAI's range, 0 to 2
        ("stop", ["a", "b", "c", "d", "e"], 400),  # OpenAI's 4 at most
        ("seed", -1, 400),
        ("tokens", 4, 400),  # /generate's field, not OpenAI's
    ],
)
def test_what_cannot_be_honoured_is_refused_in_openai_error_shape(server, field, value, status):
    got_status, error = refusal(server, {**REQUEST, field: value})
    assert got_status == status
    assert error["type"] == "invalid_request_error" and error["code"] == "E0005"
    assert error["param"] == (None if field == "tokens" else field), error
    assert field in error["message"], error


def pieces(parts: list[bytes], stops: list[str]) -> tuple[list[str], Completion]:
    completion = Completion(iter(enumerate(parts)), stops)
    return list(completion.pieces()), completion


def test_a_completion_is_cut_at_its_first_stop_string_piece_by_piece():
    # a stop string across tokens: the text that may begin one waits for the next token
    got, c = pieces([b"ab", b"c", b"de", b"fg", b"h"], ["cdf", "de"])
    assert (got, c.finish_reason, c.drawn) == (["ab", "c"], "stop", 3)  # "c" held, then sent
    got, c = pieces([b"ab", b"c", b"df", b"g"], ["cdf", "de"])
    assert (got, c.finish_reason, c.drawn) == (["ab"], "stop", 3)
    got, c = pieces([b"ab", b"c", b"x", b"de"], ["cd"])  # begun, then not: sent whole
    assert (got, c.finish_reason, c.drawn) == (["ab", "cx", "de"], "length", 4)
    got, c = pieces([b"stop", b"x"], ["st"])  # stopped at once: nothing to send
    assert (got, c.finish_reason, c.drawn) == ([], "stop", 1)
    # a character split between tokens is sent whole; a byte that is not UTF-8 is U+FFFD
    got, c = pieces([b"a\xe2\x82", b"\xacb", b"\xff", b"\xe2"], [])
    assert (got, c.finish_reason) == (["a", "\u20acb", "\ufffd", "\ufffd"], "length")
    got, _ = pieces([b"a\xe2\x82", b"\xac!"], ["\u20ac!"])  # a stop of a split character
    assert got == ["a"]
