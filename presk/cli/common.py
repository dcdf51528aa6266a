"""What every presk command line shares: argument errors and the error boundary."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from presk.errors import PreskError, UsageError, closest


def whole_number(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, else a usage error that
    says the value is not `what`."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = None
        if n is None or not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return n

    return parse


def real_number(what: str, low: float = 0.0, strict: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite real number at least `low` (above it if `strict`), else a
    usage error that says the value is not `what` (a NaN learning rate trains nothing)."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and (x > low if strict else x >= low)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return x

    return parse


# Counts of steps, epochs, batches and threads: past 2^63 nothing runs anyway.
positive_count = whole_number(1, 2**63 - 1, "a positive whole number")
count = whole_number(0, 2**63 - 1, "a whole number from 0")

# A seed is hashed with the path of what is drawn (presk/runtime/rng.py), so any whole
# number would do; an unsigned 64-bit one is what logs, headers and other tools can hold.
seed_number = whole_number(0, 2**64 - 1, "a whole number from 0 to 2^64 - 1")


class ArgParser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a presk UsageError (one line, exit 1), and
    takes a flag only as it is spelled: `--step 5` is no `--steps 5` (argparse would take
    an unambiguous prefix), and an unknown flag is refused with the nearest one named."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        # refused here, where this parser's flags are known: a command's parser hands
        # what it does not know to `presk`'s, which knows none of its flags
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._nearest_flags(extras)}")
        return namespace, extras

    def _nearest_flags(self, extras: list[str]) -> str:
        """`; did you mean --steps?` for the unknown flags among `extras` that are near
        one of this parser's: the one it begins, else the nearest by difflib."""
        known = [s for action in self._actions for s in action.option_strings]
        guesses = {}
        for word in extras:
            flag = word.partition("=")[0]
            if not (flag.startswith("-") and flag.lstrip("-")) or flag in known:
                continue
            begun = [s for s in known if s.startswith(flag)]
            guess = begun[0] if len(begun) == 1 else closest(flag, known)
            if guess is not None:
                guesses[flag] = guess
        if not guesses:
            return ""
        if len(guesses) == 1:
            return f"; did you mean {next(iter(guesses.values()))}?"
        return f"; did you mean {', '.join(f'{g} for {f}' for f, g in guesses.items())}?"

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
