"""Set-up's step: presk's C libraries built into `presk/backends/built/` (`make setup`
runs `python -m presk.backends.install`).

The replay runtime (presk/backends/replay.py), else built into the kernel cache at first
use, and the MLIR printer (presk/backends/printer.py), else done without: the bindings
print. A library that cannot be built gets a one-line error and exit status 1.
"""

from __future__ import annotations

import sys

from presk.backends import printer, replay
from presk.errors import PreskError


def main() -> int:
    failed = 0
    for name, install in (("replay runtime", replay.install), ("MLIR printer", printer.install)):
        try:
            print(f"{name}: {install()}")
        except PreskError as e:
            print(e.headline(), file=sys.stderr)
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
