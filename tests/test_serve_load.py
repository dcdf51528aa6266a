"""`presk serve` under a bounded load (tools/serve_load.py): the tiny MiniGPT served natively
on the loopback, 4 clients send 6 completion requests each at once, each request a prompt
and seed of its own, and every answer is the one the same request gets alone: none lost,
none mixed. The server stops by itself at the end, and the run takes a few seconds. An
answer on a kept-alive connection does not wait for the client's delayed acknowledgement."""

from __future__ import annotations

import http.client
import statistics
import time

import pytest
from test_generate import model_flags, trained_minigpt

from tools.serve_load import LOOPBACK, load, serving

CLIENTS, PER_CLIENT, TOKENS = 4, 6, 16


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    """The port of `presk serve` on the tiny MiniGPT (on mlir, the default), stopped
    cleanly at the end."""
    weights = trained_minigpt(tmp_path_factory.mktemp("serve_load"))[1]
    with serving(model_flags(weights), CLIENTS) as port:
        yield port


def test_concurrent_clients_get_each_their_own_answer_and_none_is_lost(port):
    start = time.perf_counter()
    report = load(port, CLIENTS, PER_CLIENT, TOKENS)
    assert (report.lost, report.mixed) == ((), ())
    assert report.requests == CLIENTS * PER_CLIENT and report.rate > 0
    print(report.text())
    assert time.perf_counter() - start < 30


def test_an_answer_on_a_kept_alive_connection_leaves_at_once(port):
    # the head and the body of an answer are two writes: under Nagle's algorithm the
    # second waits for the client's delayed acknowledgement of the first, 40 ms on Linux
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
    seconds = []
    try:
        for _ in range(9):
            start = time.perf_counter()
            conn.request("GET", "/health")
            assert conn.getresponse().read() == b'{"ok": true}\n'
            seconds.append(time.perf_counter() - start)
    finally:
        conn.close()
    assert statistics.median(seconds) < 0.02, seconds
