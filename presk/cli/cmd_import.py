"""presk import: an ONNX graph as a PSK program and its weights (docs/import.md)."""

from __future__ import annotations

import os

from presk import api
from presk.errors import GraphError, PreskError
from presk.front.bindings import parse_assignments
from presk.importer import graph, program


def configure(p) -> None:
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model to import")
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help=f"the folder to write {program.PROGRAM} and {program.WEIGHTS} to",
    )
    p.add_argument(
        "--entry",
        default="apply",
        metavar="NAME",
        help="the name of the function computing the graph's outputs (default apply)",
    )
    p.add_argument(
        "--loss",
        choices=["next-token", "none"],
        default="none",
        help="next-token: add `loss(tokens, targets)`, the mean cross-entropy of a language "
        "model's logits against the targets, for presk train, calibrate and solve (default none)",
    )
    p.add_argument(
        "--dim",
        action="append",
        metavar="NAME=N",
        help="bind a dynamic size of the graph's inputs (a dim_param) (repeatable)",
    )


def run(args) -> int:
    dims = parse_assignments(args.dim, "--dim", "E3004")
    g = graph.read(args.model, dims)
    loss = args.loss == "next-token"
    imported = program.translate(g, program.module_name(args.model), args.entry, loss)
    entry = f"{imported.module}.{imported.entry}"
    try:  # what was printed must be a program presk takes, at the sizes it was folded at
        source = api.load(imported.source)
        for name in (imported.entry, imported.loss):
            if name:
                source.elaborate(f"{imported.module}.{name}", dims=imported.dims)
    except PreskError as e:
        raise GraphError(
            f"{args.model}: the program printed for it does not elaborate, a defect of presk "
            f"import: {e.headline()}",
            code="E4006",
        ) from None
    program.write(args.out, imported)
    print(
        f"{os.path.join(args.out, program.PROGRAM)}: module {imported.module}, entry "
        f"{entry}{imported.signature}"
        + (f", and {imported.module}.{imported.loss}" if loss else "")
    )
    count = sum(int(a.size) for a in imported.weights.values())
    print(
        f"{os.path.join(args.out, program.WEIGHTS)}: {len(imported.weights)} parameters, "
        f"{count} values"
    )
    print(
        f"run it: presk run {os.path.join(args.out, program.PROGRAM)} --entry {entry} "
        f"--weights {os.path.join(args.out, program.WEIGHTS)}"
    )
    return 0
