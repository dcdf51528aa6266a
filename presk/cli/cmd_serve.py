"""presk serve: keep a model compiled and answer generation requests over local HTTP
(docs/generate.md; the server is presk/serve.py)."""

from __future__ import annotations

import signal
import threading

from presk.cli.cmd_generate import add_model_args, model_of
from presk.cli.common import positive_count, whole_number
from presk.errors import UsageError
from presk.serve import GenerationServer, Limits

port_number = whole_number(0, 65535, "a port from 0 to 65535 (0: any free one)")


def configure(p) -> None:
    add_model_args(p)
    defaults = Limits()
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    p.add_argument(
        "--port", type=port_number, default=0, help="the port (default 0: a free one, printed)"
    )
    p.add_argument(
        "--max-request-bytes",
        type=positive_count,
        default=defaults.request_bytes,
        metavar="N",
        help=f"the largest request body taken, larger ones refused (413; default "
        f"{defaults.request_bytes})",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_count,
        default=defaults.tokens,
        metavar="N",
        help=f"the most tokens a request may ask (default {defaults.tokens})",
    )
    p.add_argument(
        "--model-name",
        metavar="NAME",
        help="the model's name to OpenAI's clients (GET /v1/models; default: --weights as given)",
    )
    p.add_argument(
        "--concurrency",
        type=positive_count,
        default=defaults.concurrency,
        metavar="N",
        help=f"generations at once, more refused (429; default {defaults.concurrency})",
    )


def run(args) -> int:
    model = model_of(args)  # compiled once, before the port opens
    limits = Limits(args.max_request_bytes, args.max_tokens, args.concurrency)
    name = args.model_name or args.weights
    try:
        server = GenerationServer((args.host, args.port), model, limits, name)
    except OSError as e:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror}") from None

    def stop(signum, frame):  # shutdown waits for serve_forever: call it from another thread
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    host, port = server.server_address[:2]
    print(f"serving on http://{host}:{port}", flush=True)
    with server:
        server.serve_forever()
    print("stopped", flush=True)
    return 0
