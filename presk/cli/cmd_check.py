"""presk check --precision: a first-order bound on how far an entry's execution under a
realization is from its exact value, over the samples of a magnitude envelope."""

from __future__ import annotations

import math
from dataclasses import replace

from presk import backends
from presk.cli.common import whole_number
from presk.cli.flags import Defaulted, add_program_args, add_weights_arg, recorded_help
from presk.cli.programs import add_reference_arg, elaborate_args, envelope_of
from presk.cli.recorded import apply_checkpoint
from presk.precision.bound import Gap, Propagation, measurement
from presk.precision.envelope import Envelope
from presk.precision.rules import MODELS
from presk.progress import Progress


def configure(p) -> None:
    p.add_argument(
        "--precision",
        required=True,
        metavar="ENV.json",
        help="the magnitude envelope (presk calibrate --precision) the bound is computed from",
    )
    add_program_args(p)
    p.add_argument(
        "--realize",
        default=Defaulted("f64"),
        metavar="T|@R.json",
        help="the realization bounded: f64, f32, bf16 or a record (default: a --weights "
        "checkpoint's, else f64)",
    )
    add_weights_arg(
        p,
        "the parameters, which must be the envelope's (default: the envelope's)" + recorded_help(),
    )
    p.add_argument(
        "--model",
        choices=(*MODELS, "all"),
        default="cond",
        help="how a sum carries its terms' errors: k (k·max|w|), normwise, cond (Σ|wᵢ|, "
        "the default), rss (independent errors, an estimate), or all (a column each)",
    )
    p.add_argument(
        "--sites",
        type=whole_number(0, 2**31, "a whole number from 0"),
        default=10,
        metavar="N",
        help="how many of the sites contributing most to print (default 10)",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="also run the realization natively and the reference on the envelope's samples, "
        "and print the measured gap",
    )
    p.add_argument(
        "--backend",
        choices=backends.names(exact=False),
        default="mlir",
        help="the backend --measure runs the realization on (default mlir)",
    )
    add_reference_arg(p)


def run(args) -> int:
    if args.weights:
        apply_checkpoint(args, args.weights)
    core = elaborate_args(args)
    envelope = envelope_of(args, core)
    kernels = core.lower(args.realize)
    kernels.module  # noqa: B018 - lowering refuses a realization the kernels cannot take
    models = MODELS if args.model == "all" else (args.model,)
    propagation = Propagation(core, envelope, kernels.realization)
    with Progress(f"presk check: the bound ({args.model})", phase=True):
        results = {m: propagation.run(m) for m in models}
    print(f"presk check: `{core.entry}` of {args.file} under {kernels.realization.label}")
    print(_condition(envelope))
    gap = None
    if args.measure:
        label = f"presk check: measuring on {args.backend} against the reference"
        with Progress(label, phase=True):
            measured = replace(envelope, meta=replace(envelope.meta, reference=args.reference))
            gap = measurement(core, measured, kernels.realization, args.backend)
    _print_bounds(results, gap, args.backend, args.reference)
    _print_sites(core, results, args.sites)
    return 0


def _condition(envelope: Envelope) -> str:
    """What every bound printed from the envelope holds over."""
    m = envelope.meta
    last = m.first + m.samples - 1
    inputs = f"data {m.data}" if m.data else f"inputs drawn from seed {m.seed}"
    weights = f"weights {m.weights}" if m.weights else f"parameters initialised from seed {m.seed}"
    return (
        f"holds over these {m.samples} samples only: samples {m.first}..{last} of `{m.entry}` "
        f"({inputs}; {weights}), program {m.program[:12]}…, measured {m.date} at {m.bits} bits"
    )


def _print_bounds(results: dict, measured: Gap | None, backend: str, reference: str) -> None:
    gap = measured.upper if measured is not None else None
    if measured is not None:
        print(
            f"measured gap ({backend}, max over the samples): {_number(gap)}; "
            f"{reference} reference's radius {_number(measured.radius)}"
        )
    for model, result in results.items():
        # rss takes errors as independent: an estimate, which correlated errors can exceed
        what = "estimate" if model == "rss" else "bound"
        line = f"{what} on the output ({model}): {_number(result.bound)}"
        if gap is not None:
            line += f"   {what}/measured: {_ratio(result.bound, gap)}"
        print(line)


def _print_sites(core, results: dict, count: int) -> None:
    """The `count` sites (or arguments) contributing most, ranked by cond's parts when
    every model is printed, with their op and source line; those that add nothing under
    any model are left out."""
    if not count:
        return
    ranking = results.get("cond") or next(iter(results.values()))
    adds = [w for w in ranking.parts if any(r.parts.get(w, 0.0) > 0 for r in results.values())]
    top = sorted(adds, key=lambda w: -ranking.parts[w])[:count]
    if not top:
        return
    where = _site_places(core)
    rows = [["site", "op", "line", *results]]
    for w in top:
        op, line = where.get(w, ("argument", "-"))
        rows.append([w, op, line, *(_number(r.parts.get(w, 0.0)) for r in results.values())])
    print("sites contributing most:")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  " + "  ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip())


def _site_places(core) -> dict[str, tuple[str, str]]:
    """Each site's primitive and source line."""
    places = {}
    for fn in core.view.functions.values():
        for op in fn.ops:
            if op.site and op.prim is not None:
                line = f"{op.loc.file}:{op.loc.line}" if op.loc else "-"
                places.setdefault(op.site, (op.prim.name, line))
    return places


def _number(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "inf"


def _ratio(bound: float, gap: float) -> str:
    if gap == 0:
        return "inf" if bound else "1"
    return _number(bound / gap)
