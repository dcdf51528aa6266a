"""`make demo`: the main job of presk on a shipped example.

Runs presk-opt over a hand-written PSK-Core module with the IR printed after each
pass, mixing presk's Python passes and an upstream one in one pipeline.
"""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def main() -> int:
    example = REPO / "tutorial" / "00_linear_core.mlir"
    cmd = [
        str(BIN / "presk-opt"),
        str(example),
        "--pass-pipeline=builtin.module(psk-verify,psk-dce,canonicalize)",
        "--print-ir-after-all",
    ]
    print("$ presk-opt " + " ".join(cmd[1:]).replace(str(REPO) + "/", ""), flush=True)
    return subprocess.run(cmd, stderr=subprocess.STDOUT).returncode


if __name__ == "__main__":
    sys.exit(main())
