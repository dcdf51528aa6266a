"""Precision as a resource: the magnitude envelope, first-order bounds, sensitivities and
the solver (docs/precision.md).

- `envelope`: the record `presk calibrate --precision` writes, its JSON Schema, reading
  it (E7003) and checking it against a program, entry and bindings (E7004);
- `samples`: the arguments of an envelope's samples, which every reader re-runs;
- `calibrate`: the recording run of the exact reference, each primitive's work per
  element, and the samples spread over local processes;
- `cluster`: the samples on a Dask distributed cluster (dask is optional);
- `rules`, `bound`: the first-order bound of `presk check --precision`;
- `sensitivity`: ‖∂L/∂v‖₁ at every site, from one reverse sweep on the reference;
- `offers`, `solve`: `presk solve`: what a realization may narrow and at what price (the
  `Objective`: traffic, or predicted time), the greedy proposal, and the measurement that
  widens it until the budget holds; `solve_text`, its summary as printed.

The package sits above `presk.api` and below `presk.cli`.
"""
