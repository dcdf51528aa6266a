"""Executors behind one seam, and the registry that names them.

A backend is one module defining an executor class and one `Backend` record in
`REGISTRY`: its name, its help, and what it is, so that no other module needs its name.
A reference (`exact`) computes the program's real value from PSK-Core at `--bits`; every
other backend runs the kernel stage in its machine types (`native` if it compiles them to
native code). The command line offers the registry's names, and code that must tell
backends apart reads these capabilities, never a name.

An executor class has `create(module, realization, plan, bits, threads)`, which makes one
from the stage it consumes (PSK-Core for a reference, else the kernel stage; a module it
may change in place), and the `Executor` protocol's `call`. Each backend's module is
imported only when one of its executors is made: the reference needs neither the kernel
evaluator nor the ExecutionEngine.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol

from presk import stages
from presk.errors import UsageError, closest
from presk.realize import Realization
from presk.runtime.values import Value


@dataclass(frozen=True)
class Backend:
    """A registered backend: its name, its help, its executor class (`module:class`), and
    what it is: `exact` (a reference: PSK-Core at --bits), `native` (kernels compiled to
    native code); `stage`, the stage its executor holds and runs."""

    name: str
    help: str
    executor: str
    stage: str  # "core", "kernel" or "affine"
    exact: bool = False
    native: bool = False

    @property
    def consumes(self) -> str:
        """The stage `create` is given: PSK-Core for a reference, else the kernel stage."""
        return "core" if self.exact else "kernel"

    def make(
        self,
        module,
        realization: Realization,
        plan: str | None = None,
        bits: int = 256,
        threads: int | None = None,
    ) -> Executor:
        """An executor for `module` (at the stage this backend consumes, changed in
        place): its class imported now, its `spec` this record."""
        path, _, name = self.executor.partition(":")
        cls = getattr(importlib.import_module(path), name)
        executor = cls.create(module, realization, plan, bits, threads)
        executor.spec = self
        return executor


class Executor(Protocol):
    """What every backend's executor offers: its record, its realization, and a call of
    the entry (or function `entry`) on runtime values."""

    spec: Backend
    realization: Realization

    def call(self, args: list[Value], ctx=None, entry: str | None = None) -> Value: ...


REGISTRY: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "interp",
            "the exact reference, MPFR numbers at --bits",
            "presk.backends.interp:Interpreter",
            "core",
            exact=True,
        ),
        Backend(
            "ball",
            "the certified reference, Arb balls at --bits that contain the exact values",
            "presk.backends.ball:BallReference",
            "core",
            exact=True,
        ),
        Backend(
            "kernel",
            "the kernel evaluator in --realize",
            "presk.backends.kernel:KernelBackend",
            "kernel",
        ),
        Backend(
            "mlir",
            "the kernels compiled to native code through MLIR",
            "presk.backends.mlir:MlirBackend",
            "affine",
            native=True,
        ),
    )
}


def backend(name: str) -> Backend:
    """The backend registered as `name` (a usage error naming the nearest otherwise)."""
    found = REGISTRY.get(name)
    if found is None:
        near = closest(name, REGISTRY)
        hint = f"; did you mean {near}?" if near else ""
        raise UsageError(f"unknown backend {name!r} (backends: {', '.join(REGISTRY)}){hint}")
    return found


def make(
    name: str,
    module,
    bits: int = 256,
    realize="f64",
    threads: int | None = None,
    plan: str | None = None,
) -> Executor:
    """The backend `name` for a PSK-Core module (its derivatives expanded; changed in
    place): a reference computes it at `bits`, taking of `realize` its parameters' types;
    a machine backend first lowers it to the kernel stage for `realize` and `plan`
    (`stages.Lowering`)."""
    spec = backend(name)
    lowering = stages.Lowering.of(realize, None if spec.exact else plan)
    if not spec.exact:
        lowering.lower(module)
    return spec.make(module, lowering.realization, lowering.plan, bits, threads)


def names(exact: bool | None = None, native: bool | None = None) -> tuple[str, ...]:
    """The registered backends' names, those with the capabilities given."""
    return tuple(
        b.name
        for b in REGISTRY.values()
        if (exact is None or b.exact == exact) and (native is None or b.native == native)
    )


def described(exact: bool | None = None, native: bool | None = None) -> str:
    """`name: help; …` of the backends `names` gives, for a flag's help."""
    return "; ".join(f"{n}: {REGISTRY[n].help}" for n in names(exact, native))
