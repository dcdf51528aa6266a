"""lit configuration: presk-opt, FileCheck and upstream mlir-opt from the project's venv."""

import os
import sys

import lit.formats

from presk.ir.context import dialect_path
from presk.toolchain import llvm_tool, mlir_runtime_lib, mlir_tool

config.name = "presk"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".psk", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, ".lit-out")

venv_bin = os.path.dirname(sys.executable)
tool_dirs = [
    venv_bin,
    os.path.dirname(llvm_tool("FileCheck")),
    os.path.dirname(mlir_tool("mlir-opt")),
]
config.environment["PATH"] = os.pathsep.join(tool_dirs + [os.environ.get("PATH", "")])
for var in ("HOME", "PRESK_CACHE", "PRESK_THREADS", "XDG_CACHE_HOME"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

repo = os.path.dirname(os.path.dirname(config.test_source_root))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%repo", repo))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(
    ("%mlir_lib", os.path.dirname(mlir_runtime_lib("libmlir_c_runner_utils.so")))
)
config.substitutions.append(("%psk_irdl", dialect_path("psk.irdl.mlir")))
config.substitutions.append(("%psk_kernel_irdl", dialect_path("psk_kernel.irdl.mlir")))
