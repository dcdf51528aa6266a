"""docs/reference.md's decoder of exact reals, run on a real checkpoint of the reference:
it must give the float64 rounding gmpy2 gives, element for element (so the doc stays true)."""

from __future__ import annotations

import json
import re

import gmpy2
import numpy as np
from programs import REPO

from presk.cli.common import run_cli
from presk.cli.main import main
from presk.runtime import pskd

REGRESSION = str(REPO / "tests" / "train" / "mlp_regression.psk")


def documented_decoder() -> dict:
    text = (REPO / "docs" / "reference.md").read_text()
    section = text[text.index("### Exact reals without gmpy2") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(code, namespace)  # the doc's own code, nothing else
    return namespace


def test_the_documented_decoder_reads_a_reference_checkpoint(tmp_path):
    argv = ["train", REGRESSION, "--dim", "N=4", "--steps", "2", "--quiet", "--bits", "80"]
    argv += ["--backend", "interp"]
    assert run_cli(main, [*argv, "--out", str(tmp_path)]) == 0
    ckpt = tmp_path / "checkpoint.psk.d"
    header = json.loads((ckpt / "header.json").read_text())
    payload = (ckpt / "payload.bin").read_bytes()
    decode = documented_decoder()["mpfr_array"]
    exact = pskd.read(str(ckpt)).arrays
    seen = 0
    for entry in header["arrays"]:
        if entry["dtype"] != "mpfr":
            continue
        data = payload[entry["offset"] : entry["offset"] + entry["nbytes"]]
        count = int(np.prod(entry["shape"], dtype=np.int64))
        mine = np.array(decode(data, count))
        theirs = np.array([float(x) for x in exact[entry["name"]].ravel()])
        assert np.array_equal(mine.view(np.uint64), theirs.view(np.uint64)), entry["name"]
        seen += count
    assert seen > 100  # parameters and both moments, exactly


def test_the_documented_decoder_reads_specials_and_extremes():
    decode = documented_decoder()["mpfr_to_float"]
    with gmpy2.context(precision=256):
        for text in [
            "1.5",
            "-0.375",
            "0",
            "-0",
            "inf",
            "-inf",
            "1e-310",
            "-7e300",
            "1e-400",
            "0.1",
        ]:
            x = gmpy2.mpfr(text)
            got, want = np.float64(decode(gmpy2.to_binary(x))), np.float64(float(x))
            assert got.view(np.uint64) == want.view(np.uint64), text
        assert np.isnan(decode(gmpy2.to_binary(gmpy2.mpfr("nan"))))
