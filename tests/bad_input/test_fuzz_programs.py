"""Mutated PSK programs: each is shown or refused with a code, never a traceback.

The seeds are the shipped programs and fuzz_seed.psk (the syntax they do not use), each
with the entries its `# run:` lines give and its top-level functions at small sizes. Hypothesis mutates them (derandomized, so every run
sees the same cases): tokens and lines deleted, duplicated, swapped; tokens of the
grammar's vocabulary, numbers and sizes out of range, and random unicode inserted;
identifiers renamed; the file cut short. Each mutant goes through `presk dump --stage
ast` and `--stage core` at its seed's entry, in this process (tests/bad_input/refusal.py).
Nesting stays shallow: programs nested past the parser's limit are another test's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from programs import REPO, runs

from bad_input.refusal import accept_or_refuse
from presk.prims import all_prims

SOURCES = sorted(
    [
        *REPO.glob("tutorial/*.psk"),
        *REPO.glob("tests/data/*.psk"),
        *REPO.glob("tests/train/*.psk"),
        *REPO.glob("corpus/**/*.psk"),
        Path(__file__).with_name("fuzz_seed.psk"),  # the syntax the others do not use
    ]
)
# Any character is a token: whitespace runs, comments, numbers, words, one other character.
TOKEN = re.compile(r"\s+|#[^\n]*|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\w+|\S")
WORD = re.compile(r"(?!\d)\w+")
TYPE_WORDS = {"ℝ", "R", "nat", "ℕ", "bool"}
# Numbers and sizes out of every range: zero, negative, fractional, past int64, past f64,
# past the digits Python converts to an int.
SIZES = ["0", "-3", "-1", "2.5", "1e400", "1e-400", "2^62", str(2**62), str(10**30), "9" * 400]
SIZES += ["9" * 5000, "exp(1000)"]
GRAMMAR = (REPO / "presk" / "front" / "psk.lark").read_text()
VOCABULARY = sorted(
    {*re.findall(r'"([^"\s]+)"', GRAMMAR), "nat{3}", "ℝ[", "{", "}", "\n", *SIZES}
    | {p.name for p in all_prims()}
    | {"grad", "vjp", "fold", "normal", "zeros", "ones"}
)


@dataclass(frozen=True)
class Seed:
    text: str
    entries: tuple[tuple[str, ...], ...]  # each: --entry, --dim, --const


def top_level_entries(text: str) -> list[tuple[str, ...]]:
    """`--entry f` for each top-level function, every dim without a default bound to 3."""
    dims = [
        name
        for line in re.findall(r"^dim (.+)$", text, re.M)
        for name, default in re.findall(r"(\w+)(\s*=\s*\d+)?", line)
        if not default
    ]
    bound = [a for d in dims for a in ("--dim", f"{d}=3")]
    return [("--entry", f, *bound) for f in re.findall(r"^fn (\w+)", text, re.M)]


def seeds() -> list[Seed]:
    out = []
    for path in SOURCES:
        text = path.read_text()
        entries = [tuple(a) for a in runs(path)] + top_level_entries(text)
        out.append(Seed(text, tuple(dict.fromkeys(entries))))
    return out


SEEDS = seeds()


def _index(draw, items) -> int | None:
    return draw(st.integers(0, len(items) - 1)) if items else None


def _solid(tokens: list[str]) -> list[int]:
    """The positions of tokens that are not whitespace."""
    return [i for i, t in enumerate(tokens) if not t.isspace()]


def _on_tokens(edit):
    """A mutation of the text from an `edit(draw, tokens, solid)` of its token list."""

    def mutate(draw, text: str) -> str:
        tokens = TOKEN.findall(text)
        solid = _solid(tokens)
        if solid:
            edit(draw, tokens, solid)
        return "".join(tokens)

    mutate.__name__ = edit.__name__
    return mutate


def _on_lines(edit):
    """A mutation of the text from an `edit(draw, lines)` of its lines."""

    def mutate(draw, text: str) -> str:
        lines = text.splitlines(keepends=True)
        if lines:
            edit(draw, lines)
        return "".join(lines)

    mutate.__name__ = edit.__name__
    return mutate


@_on_tokens
def delete_token(draw, tokens, solid):
    del tokens[solid[_index(draw, solid)]]


@_on_tokens
def duplicate_token(draw, tokens, solid):
    i = solid[_index(draw, solid)]
    tokens.insert(i, tokens[i] + " ")


@_on_tokens
def swap_tokens(draw, tokens, solid):
    i, j = solid[_index(draw, solid)], solid[_index(draw, solid)]
    tokens[i], tokens[j] = tokens[j], tokens[i]


@_on_tokens
def insert_vocabulary(draw, tokens, solid):
    word = draw(st.sampled_from(VOCABULARY))
    tokens.insert(_index(draw, tokens), f" {word} ")


@_on_tokens
def change_number(draw, tokens, solid):
    numbers = [i for i in solid if tokens[i][0].isdigit()]
    if numbers:
        tokens[numbers[_index(draw, numbers)]] = draw(st.sampled_from(SIZES))


@_on_tokens
def change_size_in_type(draw, tokens, solid):
    sizes = _sizes_in_types(tokens)
    if sizes:
        tokens[sizes[_index(draw, sizes)]] = draw(st.sampled_from(SIZES))


def _sizes_in_types(tokens: list[str]) -> list[int]:
    """The positions of the words and numbers inside a type's brackets (`ℝ[B, 4]`, `nat{V}`)."""
    out = []
    for k, t in enumerate(tokens):
        if t not in TYPE_WORDS:
            continue
        depth = 0
        for m in range(k + 1, len(tokens)):
            u = tokens[m]
            if u in ("[", "{"):
                depth += 1
            elif u in ("]", "}"):
                depth -= 1
                if depth <= 0 and u == "]":
                    break
            elif depth and re.match(r"\w", u):
                out.append(m)
            elif not depth and not u.isspace():
                break
    return out


@_on_tokens
def rename_identifier(draw, tokens, solid):
    names = sorted({tokens[i] for i in solid if WORD.fullmatch(tokens[i])})
    if not names:
        return
    old = names[_index(draw, names)]
    new = draw(st.sampled_from([*names, *VOCABULARY, "fuzzed", "_", "ℝℝ"]))
    every = draw(st.booleans())  # every use, or a single one
    places = [i for i in solid if tokens[i] == old]
    for i in places if every else [places[_index(draw, places)]]:
        tokens[i] = new


@_on_lines
def delete_line(draw, lines):
    del lines[_index(draw, lines)]


@_on_lines
def duplicate_line(draw, lines):
    i = _index(draw, lines)
    lines.insert(i, lines[i])


@_on_lines
def swap_lines(draw, lines):
    i, j = _index(draw, lines), _index(draw, lines)
    lines[i], lines[j] = lines[j], lines[i]


def truncate(draw, text: str) -> str:
    return text[: draw(st.integers(0, len(text)))]


def insert_unicode(draw, text: str) -> str:
    noise = draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=6))
    at = draw(st.integers(0, len(text)))
    return text[:at] + noise + text[at:]


MUTATIONS = [
    delete_token,
    duplicate_token,
    swap_tokens,
    insert_vocabulary,
    change_number,
    change_size_in_type,
    rename_identifier,
    delete_line,
    duplicate_line,
    swap_lines,
    truncate,
    insert_unicode,
]


@st.composite
def mutants(draw) -> tuple[str, tuple[str, ...]]:
    """A seed's text after one to three mutations, and one of the seed's entries."""
    seed = draw(st.sampled_from(SEEDS))
    text = seed.text
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        note(mutation.__name__)
        text = mutation(draw, text)
    return text, draw(st.sampled_from(seed.entries))


@pytest.fixture(scope="module")
def program_file(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "mutant.psk"


# 1000 mutants, 2000 runs of presk: about a minute on two cores.
FUZZ = settings(
    max_examples=1000,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(mutant=mutants())
def test_mutated_programs_are_shown_or_refused(program_file, mutant):
    text, args = mutant
    note(text)
    program_file.write_text(text, encoding="utf-8")
    accept_or_refuse(["dump", program_file, "--stage", "ast"])
    accept_or_refuse(["dump", program_file, "--stage", "core", *args])


# What the fuzzer found presk crashing on and presk now shows (what it now refuses is in
# tests/test_language_errors.py): numbers past a float's range in an initializer's scale
# and a precision budget.
SCALED = "module M {{\n  param w : ℝ[3] = normal(scale = {})\n  fn f() -> ℝ[3] {{ w }}\n}}\n"
BUDGET = "precision = budget(rel_error = {})\nfn f() -> ℝ {{ 1 }}\n"
FOUND = {  # name: (program, entry)
    "scale_past_float": (SCALED.format("9" * 400 + " / sqrt(3)"), "M.f"),
    "scale_exp_past_float": (SCALED.format("exp(1000)"), "M.f"),
    "budget_past_float": (BUDGET.format("9" * 400), "f"),
    "budget_below_float": (BUDGET.format("1e-400"), "f"),
}


@pytest.mark.parametrize("name", FOUND)
def test_found_by_the_fuzzer_and_shown(name, tmp_path):
    text, entry = FOUND[name]
    path = tmp_path / f"{name}.psk"
    path.write_text(text, encoding="utf-8")
    assert accept_or_refuse(["dump", path, "--entry", entry]) == ""
