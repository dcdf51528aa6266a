"""A bounded load test of `presk serve` on the loopback: it starts the server on
127.0.0.1, sends each of a fixed number of completion requests (`POST /v1/completions`,
each a prompt and seed of its own) once alone, then all of them again from a fixed
number of concurrent clients, compares every concurrent answer with the same request's
lone answer, prints the requests per second, and stops the server. Exit status 1 when an
answer is lost (no 200) or mixed (not the lone answer). tests/test_serve_load.py runs it
in `make test`; docs/generate.md records its figure.

    .venv/bin/python tools/serve_load.py [--clients 3] [--requests 4] [--tokens 8] \\
        -- tutorial/05_minigpt.psk --weights CKPT [presk serve's flags for the model]
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRESK = Path(sys.executable).parent / "presk"
LOOPBACK = "127.0.0.1"
SECONDS = 60  # the longest wait on one answer, or on the server to start or stop


def completion_request(i: int, tokens: int) -> dict:
    """The i-th request: its own prompt and seed, so that answers cannot pass for each
    other's."""
    return {"prompt": f"Request {i}: The Software", "max_tokens": tokens, "seed": i}


def post(conn: http.client.HTTPConnection, request: dict) -> dict | None:
    """The completion's answer without its id and time (which differ between runs of the
    same request), or None when it is not a 200."""
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/v1/completions", json.dumps(request), headers)
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        return None
    answer = json.loads(body)
    return {k: answer[k] for k in ("model", "choices", "usage")}


@dataclass(frozen=True)
class Report:
    clients: int
    requests: int
    seconds: float  # from the clients' common start to the last answer
    lost: tuple[int, ...]  # the requests answered with no 200, or not at all
    mixed: tuple[int, ...]  # the requests answered otherwise than alone

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def text(self) -> str:
        return (
            f"{self.requests} requests from {self.clients} concurrent clients in "
            f"{self.seconds:.2f} s: {self.rate:.1f} requests/s; "
            f"{len(self.lost)} lost, {len(self.mixed)} mixed"
        )


def load(port: int, clients: int, per_client: int, tokens: int) -> Report:
    """`clients` threads, each on its own connection, send `per_client` requests one after
    another, all starting together; each answer is compared with its request's answer when
    sent alone."""
    requests = [completion_request(i, tokens) for i in range(clients * per_client)]
    lone = http.client.HTTPConnection(LOOPBACK, port, timeout=SECONDS)
    alone = [post(lone, r) for r in requests]
    lone.close()
    answers: list[dict | None] = [None] * len(requests)
    start = [0.0]
    together = threading.Barrier(clients, action=lambda: start.__setitem__(0, time.perf_counter()))

    def client(c: int) -> None:
        conn = http.client.HTTPConnection(LOOPBACK, port, timeout=SECONDS)
        try:
            together.wait()
            for i in range(c, len(requests), clients):
                answers[i] = post(conn, requests[i])
        except (OSError, http.client.HTTPException):  # the rest of this client's are lost
            pass
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start[0]
    lost = tuple(i for i, a in enumerate(answers) if a is None or alone[i] is None)
    mixed = tuple(i for i, a in enumerate(answers) if i not in lost and a != alone[i])
    return Report(clients, len(requests), seconds, lost, mixed)


@contextmanager
def serving(model_flags: list[str], concurrency: int) -> Iterator[int]:
    """The port of `presk serve` started on the loopback with `model_flags` (the flags
    after them win, so it listens on 127.0.0.1 whatever they say), stopped with SIGTERM
    at the end; RuntimeError if it does not start or stop cleanly."""
    command = [str(PRESK), "serve", *model_flags, "--host", LOOPBACK, "--port", "0"]
    command += ["--concurrency", str(concurrency)]
    with tempfile.TemporaryFile("w+") as log:  # a line a request: a pipe left unread would fill
        proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            first = proc.stdout.readline()
            if not first.startswith(f"serving on http://{LOOPBACK}:"):
                raise RuntimeError(f"presk serve did not start: {first}{_read(log)}")
            yield int(first.rsplit(":", 1)[1])
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            rest, _ = proc.communicate(timeout=SECONDS)
        errors = _read(log)
        if proc.returncode != 0 or rest != "stopped\n" or "Traceback" in errors:
            raise RuntimeError(f"presk serve did not stop cleanly ({proc.returncode}): {errors}")


def _read(log) -> str:
    log.flush()
    log.seek(0)
    return log.read()


def bounded(low: int, high: int):
    def parse(text: str) -> int:
        if not (text.isdigit() and low <= int(text) <= high):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from {low} to {high}")
        return int(text)

    return parse


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--clients", type=bounded(1, 16), default=3, help="concurrent clients (3)")
    p.add_argument("--requests", type=bounded(1, 64), default=4, help="requests a client (4)")
    p.add_argument("--tokens", type=bounded(1, 64), default=8, help="max_tokens a request (8)")
    p.add_argument("model", nargs=argparse.REMAINDER, help="-- then presk serve's model flags")
    args = p.parse_args(argv)
    model = args.model[1:] if args.model[:1] == ["--"] else args.model
    if not model:
        p.error("name the model after --: FILE --weights CKPT …")
    with serving(model, args.clients) as port:
        report = load(port, args.clients, args.requests, args.tokens)
    print(report.text())
    return 1 if report.lost or report.mixed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
