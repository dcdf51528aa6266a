"""What every presk command line shares: argument errors and the error boundary."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from presk.errors import PreskError, UsageError


class ArgParser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a presk UsageError (one line, exit 1)."""

    def error(self, message: str):  # argparse calls this and expects it not to return
        raise UsageError(f"{message} (see {self.prog} --help)")


def run_cli(main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run `main`, turning presk errors into a message on stderr and exit status 1."""
    try:
        return main(sys.argv[1:] if argv is None else argv)
    except PreskError as e:
        sys.stdout.flush()
        print(e.render(), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
