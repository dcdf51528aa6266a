"""The files of an exported model besides the emitted code: model.h (the entry's C
interface and the tables the fixed runtime reads, the tokens' bytes among them), model.c
(the fixed runtime around the emitted code), checkpoint.c (the reader of a .psk.d
checkpoint's parameters), main.c, the Makefile, model.bin (the parameters in their
realized types, then the schedule's constants, each at a 64-byte boundary) and, for a
model of tokens whose checkpoint records its tokenizer, vocab.json."""

from __future__ import annotations

import json
import re
from importlib import resources

import numpy as np

from presk.backends.schedule import ALIGN
from presk.fileio import PSKD_HEADER_BYTES, PSKD_HEADER_DEPTH
from presk.quantize import Quantized
from presk.runtime.synth import entry_arguments
from presk.runtime.values import leaves
from presk.train.tokenizer import Tokenizer, Vocabulary, to_meta

# The flags of record: C99, no contraction of a multiply and an add, and the C library's
# functions kept as calls (no builtin rewrites pow(x, 2) as x * x, as LLVM would not:
# docs/mlir.md, section 8). No fast-math.
EXACT_FLAGS = "-std=c99 -ffp-contract=off -fno-builtin"
CFLAGS = "-O2 -Wall -Werror"
C_TYPES = {
    "float64": "double",
    "float32": "float",
    "bfloat16": "uint16_t",  # a bf16's bits
    "int64": "int64_t",
    "int8": "int8_t",
}


def c_ident(name: str) -> str:
    """A path as a C identifier: `params.blocks.w` is `params_blocks_w`."""
    return re.sub(r"\W", "_", name)


def declaration(a) -> str:
    """`float x[4][3]` for an export.Array."""
    dims = "".join(f"[{n}]" for n in a.shape) or "[1]"
    return f"{C_TYPES[a.dtype.name]} {a.name}{dims}"


def model_files(
    kernels, model, param_regions: list[np.ndarray], emitted: str, tokenizer: Tokenizer | None
) -> dict:
    schedule = model.schedule
    data_arrays = param_regions + [np.ascontiguousarray(c) for c in schedule.consts]
    consts_from = 1 + schedule.inputs
    regions = list(range(1, 1 + len(param_regions)))
    regions += [consts_from + i for i in range(len(schedule.consts))]
    data, offsets = _packed(data_arrays)
    names = _param_names(model.params) + [f"constant {i}" for i in range(len(schedule.consts))]
    params = _param_rows(kernels, model.params, data_arrays, offsets)
    template = resources.files("presk.export")
    places = list(zip(regions, offsets, strict=True))
    tokens = vocabulary_bytes(kernels.core.view, tokenizer)
    header = _header(kernels, model, places, names, data_arrays, len(data), params, tokens)
    vocab = {} if tokenizer is None else {"vocab.json": json.dumps(to_meta(tokenizer)) + "\n"}
    return {
        "model.h": header,
        "model.c": template.joinpath("model_template.c")
        .read_text()
        .replace("/* @EMITTED@ */", emitted.rstrip()),
        "checkpoint.c": template.joinpath("checkpoint_template.c").read_text(),
        "main.c": template.joinpath("main_template.c").read_text(),
        "Makefile": MAKEFILE,
        "model.bin": data,
        **vocab,
    }


def vocabulary_bytes(view, tokenizer: Tokenizer | None) -> list[bytes]:
    """The bytes each token of the entry stands for, as `presk generate` decodes them:
    its tokenizer cut to the V of its first bounded argument (`nat{V}`), else the
    tokenizer's own tokens; none without a tokenizer."""
    if tokenizer is None:
        return []
    bounds = view.attrs.get("psk.bounds", {})
    names = [n for n, _ in entry_arguments(view, view.entry_function) if n in bounds]
    return Vocabulary(tokenizer, bounds[names[0]] if names else tokenizer.size).table()


def _packed(arrays: list[np.ndarray]) -> tuple[bytes, list[int]]:
    """The arrays' bytes one after another, each at a multiple of ALIGN, and each offset."""
    out, offsets = bytearray(), []
    for a in arrays:
        out.extend(b"\0" * (-len(out) % ALIGN))
        offsets.append(len(out))
        out.extend(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    return bytes(out), offsets


def _param_leaves(params) -> list:
    """The parameters' (path, tensor) pairs; none for an entry without."""
    return leaves(params) if params is not None else []


def _param_names(params) -> list[str]:
    """Each parameter region's description: a path, or two for integer weights."""
    names = []
    for path, t in _param_leaves(params):
        if isinstance(t.data, Quantized):
            names += [f"{path} (integer weights)", f"{path} (their f32 scales)"]
        else:
            names.append(path)
    return names


# A parameter's realized type in checkpoint.c's table: its array's dtype in model.bin
MODEL_TYPES = {
    "float64": "MODEL_F64",
    "float32": "MODEL_F32",
    "bfloat16": "MODEL_BF16",
    "int64": "MODEL_I64",
}


def _c_string(data: str | bytes) -> str:
    """A C string literal of `data`'s bytes (a text's in UTF-8); every other byte as a
    three-digit octal escape, which no digit after it extends."""
    raw = data.encode() if isinstance(data, str) else data
    return (
        '"'
        + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\?' else f"\\{b:03o}" for b in raw)
        + '"'
    )


def _param_rows(kernels, params, data_arrays, offsets) -> list[str]:
    """checkpoint.c's table: each parameter's array in a checkpoint (`params/PATH`), its
    shape, and its realized type and offsets in model.bin (integer weights: the integers',
    the scales', the axis a scale runs along and the scheme)."""
    rows, region = [], 0
    for path, t in _param_leaves(params):
        shape = tuple(t.type.shape)
        dims = "{" + ", ".join(str(n) for n in shape or (0,)) + "}"
        if isinstance(t.data, Quantized):
            w = t.data
            pow2 = int(kernels.realization.quant[path].scheme == "pow2")
            kind = "MODEL_INT8" if w.bits == 8 else "MODEL_INT4"
            at, scales, axis = offsets[region], offsets[region + 1], len(shape) + w.over
            region += 2
        else:
            kind = MODEL_TYPES[data_arrays[region].dtype.name]
            at, scales, axis, pow2 = offsets[region], 0, 0, 0
            region += 1
        name = _c_string(f"params/{path}")
        rows.append(f"{{{name}, {len(shape)}, {dims}, {kind}, {at}, {scales}, {axis}, {pow2}}}")
    return rows


def _places(places: list[tuple[int, int]]) -> str:
    return "{" + "".join(f"{{{r}, {o}}}, " for r, o in places) + "{0, 0}}"


def _sizes(sizes: list[int]) -> str:
    return "{" + "".join(f"{n}, " for n in sizes) + "0}"


def _token_lines(tokens: list[bytes]) -> list[str]:
    """model.h's vocabulary: the tokens' bytes one after another (a string literal a
    token), and where each starts."""
    offsets = np.cumsum([0, *map(len, tokens)]).tolist()
    return [
        "/* The vocabulary: token t stands for the bytes of MODEL_TOKEN_TEXT from",
        "   MODEL_TOKEN_OFFSETS[t] to MODEL_TOKEN_OFFSETS[t + 1] (model_token gives them), as",
        "   presk generate prints it: U+FFFD for a token that stands for no bytes of its own.",
        "   MODEL_VOCAB is 0 when the export was given no tokenizer (vocab.json holds the",
        "   one given). */",
        f"#define MODEL_VOCAB {len(tokens)}",
        "#define MODEL_TOKEN_TEXT \\",
        *(f"  {_c_string(t)} \\" for t in tokens),
        '  ""',
        "#define MODEL_TOKEN_OFFSETS { \\",
        *(
            "  " + ", ".join(map(str, offsets[i : i + 16])) + ", \\"
            for i in range(0, len(offsets), 16)
        ),
        "  }",
    ]


def _header(
    kernels, model, data_places, names, data_arrays, data_bytes: int, params, tokens
) -> str:
    schedule = model.schedule
    core = kernels.core
    bindings = ", ".join(f"{k}={v}" for k, v in {**core.consts, **core.dims}.items())
    realize = kernels.realization.spelling or kernels.realization.default
    outputs = [(t.data.region, t.data.offset) for _, t in leaves(schedule.result)]
    rank = max([1, *(t.type.rank for _, t in _param_leaves(model.params))])
    lines = [
        f"/* model.h, written by presk export: entry `{core.entry}` of "
        f"{core.view.attrs.get('psk.program', '')}",
        f"   ({bindings or 'no sizes'}), realization {realize}. */",
        "#ifndef PRESK_MODEL_H",
        "#define PRESK_MODEL_H",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        "/* model.bin: the parameters in their realized types, then the constants, each at the",
        "   offset given (bf16 arrays hold each value's 16 bits, as uint16_t). */",
        *(
            f"/*   {name}: {C_TYPES[a.dtype.name]}{''.join(f'[{n}]' for n in a.shape)} at {off} */"
            for name, a, (_, off) in zip(names, data_arrays, data_places, strict=True)
        ),
        f"#define MODEL_DATA_BYTES {data_bytes}",
        f"#define MODEL_DATA_ARRAYS {len(data_arrays)}",
        "",
        "/* The parameters a checkpoint gives (checkpoint.c): each one's array in the .psk.d,",
        "   its rank and shape, its realized type, its offset in model.bin (integer weights:",
        "   of the integers, then of their f32 scales, the axis a scale's absmax runs along,",
        "   1 for pow2 scales). */",
        "enum model_type { MODEL_F64, MODEL_F32, MODEL_BF16, MODEL_I64, MODEL_INT8, MODEL_INT4 };",
        f"#define MODEL_PARAMS {len(params)}",
        f"#define MODEL_PARAM_RANK {rank}",
        "#define MODEL_PARAM_TABLE { \\",
        *(f"  {row}, \\" for row in params),
        '  {"", 0, {0}, MODEL_F64, 0, 0, 0, 0}}',
        "/* A .psk.d's header.json is read up to this size and nesting, as presk reads it. */",
        f"#define MODEL_HEADER_BYTES {PSKD_HEADER_BYTES}",
        f"#define MODEL_HEADER_DEPTH {PSKD_HEADER_DEPTH}",
        "",
        "/* The inputs, in the order model_run takes them. */",
        *(f"/*   {i}: {declaration(a)} */" for i, a in enumerate(model.inputs)),
        f"#define MODEL_INPUTS {len(model.inputs)}",
        "/* The outputs, in the order model_run writes them. */",
        *(f"/*   {i}: {declaration(a)} */" for i, a in enumerate(model.outputs)),
        f"#define MODEL_OUTPUTS {len(model.outputs)}",
        "",
        "/* The schedule: regions 0 (the arena), the parameters, the inputs, the constants. */",
        f"#define MODEL_ARENA_BYTES {schedule.arena}",
        f"#define MODEL_REGIONS {1 + schedule.inputs + len(schedule.consts)}",
        f"#define MODEL_FIRST_INPUT {1 + model.param_regions}",
        f"#define MODEL_DATA_PLACES {_places(data_places)}",
        f"#define MODEL_INPUT_BYTES {_sizes([a.nbytes for a in model.inputs])}",
        f"#define MODEL_OUTPUT_BYTES {_sizes([a.nbytes for a in model.outputs])}",
        f"#define MODEL_OUTPUT_PLACES {_places(outputs)}",
        "",
        *_token_lines(tokens),
        "",
        "typedef struct model model;",
        "extern const size_t model_input_bytes[MODEL_INPUTS + 1];",
        "extern const size_t model_output_bytes[MODEL_OUTPUTS + 1];",
        "",
        "/* model.bin read into memory; NULL if it cannot be read or is not",
        "   MODEL_DATA_BYTES long. */",
        "model *model_load(const char *path);",
        "void model_free(model *m);",
        "/* The parameters of m replaced by those of the checkpoint `dir` (a .psk.d directory),",
        "   each converted to its realized type: 0; or -1, with why the checkpoint is refused",
        "   written to why[size] (a path or shape of another model, a damaged file, …). */",
        "int model_read_checkpoint(model *m, const char *dir, char *why, size_t size);",
        "/* The entry on inputs[i] (each as listed above), its outputs written to outputs[j].",
        "   0; k > 0 when the k-th index check failed (an index out of range: nothing is",
        "   computed); -1 when the arena cannot be allocated. */",
        "int model_run(const model *m, const void *const inputs[], void *const outputs[]);",
        "/* The bytes token t stands for, their number in *length; NULL for a token not in",
        "   the vocabulary (below 0, from MODEL_VOCAB on). */",
        "const char *model_token(int64_t t, size_t *length);",
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)


MAKEFILE = f"""# Written by presk export. `make` builds ./model (main.c, model.c and checkpoint.c);
# `make model.o checkpoint.o` the model alone. EXACT_FLAGS are what keep the native
# backend's bits: keep them.
CC ?= cc
CFLAGS ?= {CFLAGS}
EXACT_FLAGS = {EXACT_FLAGS}

model: main.c model.c checkpoint.c model.h
\t$(CC) $(CFLAGS) $(EXACT_FLAGS) -o $@ main.c model.c checkpoint.c -lm

model.o checkpoint.o: model.h
%.o: %.c
\t$(CC) $(CFLAGS) $(EXACT_FLAGS) -c -o $@ $<

clean:
\trm -f model model.o checkpoint.o

.PHONY: clean
"""
