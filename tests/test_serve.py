"""`presk serve`: started on 127.0.0.1 at a free port, it answers concurrent requests with
`presk generate`'s text, streams it, refuses an oversized, malformed or excess request with
a JSON error and keeps answering, and stops cleanly on SIGTERM. (tests/test_serve_openai.py
asks the same server in OpenAI's convention.)"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import BIN, REPO
from test_generate import generated, model_flags, trained_minigpt

REQUEST = {"prompt": "The Software", "tokens": 16, "seed": 5, "top_k": 20, "temperature": 0.9}
SAME = ["--prompt", "The Software", "--tokens", "16", "--seed", "5", "--top-k", "20"]
CONCURRENCY = 3


@pytest.fixture(scope="module", name="server")
def served_model(tmp_path_factory):
    """(host, port, checkpoint) of `presk serve` on the kernel evaluator; stopped with
    SIGTERM at the end, which it must survive cleanly."""
    base = tmp_path_factory.mktemp("serve")
    _, weights = trained_minigpt(base)
    limits = ["--max-request-bytes", "512", "--concurrency", str(CONCURRENCY)]
    command = [str(BIN / "presk"), "serve", *model_flags(weights), "--backend", "kernel", *limits]
    with open(base / "stderr", "w+") as stderr:
        proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            first = proc.stdout.readline()
            assert first.startswith("serving on http://127.0.0.1:"), (first, _read(stderr))
            yield "127.0.0.1", int(first.rsplit(":", 1)[1]), weights
        finally:
            proc.send_signal(signal.SIGTERM)
            rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and rest == "stopped\n", (rest, _read(stderr))
        assert "Traceback" not in _read(stderr)


def _read(f) -> str:
    f.seek(0)
    return f.read()


def post(server, body: bytes | dict, path: str = "/generate") -> tuple[int, str]:
    """The status and body of a POST (a dict sent as JSON)."""
    host, port, _ = server
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def error_code(answer: tuple[int, str]) -> tuple[int, str]:
    status, body = answer
    return status, json.loads(body)["error"]["code"]


def test_concurrent_requests_get_the_text_presk_generate_prints(server):
    expected = generated(server[2], *SAME, "--temperature", "0.9", "--backend", "kernel")
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        answers = list(pool.map(lambda _: post(server, REQUEST), range(CONCURRENCY)))
    for status, body in answers:
        assert status == 200, body
        assert json.loads(body) == {"text": expected["text"], "tokens": expected["tokens"]}
    status, streamed = post(server, {**REQUEST, "stream": True})  # http.client un-chunks it
    assert status == 200 and streamed == expected["text"]


def test_a_bad_request_gets_a_json_error_and_the_server_goes_on(server):
    assert error_code(post(server, {"prompt": "x" * 600})) == (413, "E0006")
    assert error_code(post(server, b'{"prompt": "The')) == (400, "E0005")
    assert error_code(post(server, {"prompt": "a", "tokens": 0})) == (400, "E0005")
    assert error_code(post(server, {"prompt": "a", "colour": "red"})) == (400, "E0005")
    assert error_code(post(server, {"prompt": "a"}, "/elsewhere")) == (404, "E0005")
    host, port, _ = server
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", "/health")
    assert json.loads(conn.getresponse().read()) == {"ok": True}
    conn.close()
    status, body = post(server, {"prompt": "a", "tokens": 2})
    assert status == 200 and json.loads(body)["text"].startswith("a")


def test_a_request_past_the_concurrency_is_refused_while_the_others_run(server):
    host, port, _ = server
    streams = []
    try:
        for _ in range(CONCURRENCY):  # each holds a slot from its first chunk to its last
            conn = http.client.HTTPConnection(host, port, timeout=60)
            conn.request(
                "POST", "/generate", json.dumps({"prompt": "a", "tokens": 512, "stream": True})
            )
            response = conn.getresponse()
            assert response.status == 200 and response.read1(1) == b"a"
            streams.append(conn)
        assert error_code(post(server, REQUEST)) == (429, "E0007")
        status, body = post(server, {"prompt": "a"}, "/v1/completions")  # the same slots
        assert (status, json.loads(body)["error"]["type"]) == (429, "rate_limit_error")
    finally:
        for conn in streams:  # the server stops each generation at its next write
            conn.close()
