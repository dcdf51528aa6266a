"""`presk import`: an ONNX graph read, its shape arithmetic folded at bound sizes, and
printed as a PSK program with its weights (docs/import.md).

Import is a front end, not a second language: what it writes is ordinary PSK source that
the parser, checker and elaborator take, so every command works on an imported model.
`graph` reads and checks the file, `fold` evaluates what depends on no input,
`translate` carries each value between ONNX's axes and PSK's, `ops` writes the PSK of
each operator, and `program` prints the module and writes it with its weights.
"""
