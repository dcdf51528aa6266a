// PSK-Kernel: the `psk_kernel` dialect. A kernel is a `func.func` marked `psk_kernel.kernel`
// over row-major buffers (its inputs, then its one output), whose body is a loop nest of
// upstream `scf.for` loops holding the ops below and `arith`/`math` arithmetic in the
// kernel's machine type.
//
// Types
//   !psk_kernel.buffer<f32, array<i64: 4, 2>, ["batch", ""]>   a row-major buffer of a
//       machine type (f64, f32, bf16, i64, i8 or i1), with its shape and axis names
//
// In the host program (PSK-Core after psk-lower-to-kernel), `psk_kernel.launch` runs the
// kernel `kernel` on the buffers of the tuple it is given and gives the output: it keeps
// the `psk.site` of the op (or fusion group) it replaces. A launch marked
// `psk_kernel.draw = "dropout"` also gets the mask the host draws for it (from `rate` and
// the key `psk.key` or its site), as a last input.
//
// Loads and stores take one `index` per axis. A load's result type may be wider than the
// buffer's element type (a bf16 parameter read by an f32 nest): the load widens exactly.
// A store's value may be wider than the buffer: the store rounds to nearest even. A load
// or store of a vector of n lanes reads or writes n consecutive elements along the last
// axis, from the element the indices name.
irdl.dialect @psk_kernel {
  irdl.type @buffer {
    %elem = irdl.any
    %shape = irdl.base "#builtin.dense_array"
    %names = irdl.base "#builtin.array"
    irdl.parameters(elem: %elem, shape: %shape, names: %names)
  }
  // a scalar element of a buffer, widened to the result type
  irdl.operation @load {
    %buf = irdl.base @psk_kernel::@buffer
    %idx = irdl.is index
    %res = irdl.any
    irdl.operands(buffer: %buf, indices: variadic %idx)
    irdl.results(res: %res)
  }
  // a scalar stored to a buffer, rounded to its element type
  irdl.operation @store {
    %val = irdl.any
    %buf = irdl.base @psk_kernel::@buffer
    %idx = irdl.is index
    irdl.operands(value: %val, buffer: %buf, indices: variadic %idx)
  }
  // run a kernel on the buffers of a tuple; its output buffer is the result
  irdl.operation @launch {
    %args = irdl.base "!builtin.tuple"
    %res = irdl.any
    %k = irdl.base "#builtin.symbol_ref"
    irdl.operands(args: %args)
    irdl.results(res: %res)
    irdl.attributes { "kernel" = %k }
  }
  // a buffer private to the enclosing loop iteration (a packed panel of an operand),
  // in the kernel's arithmetic type
  irdl.operation @scratch {
    %buf = irdl.base @psk_kernel::@buffer
    irdl.results(buffer: %buf)
  }
  // a C library function of one or two scalars (exp, log, tanh, sin, cos, erf, ...)
  irdl.operation @call {
    %args = irdl.any
    %res = irdl.any
    %fn = irdl.base "#builtin.string"
    irdl.operands(args: variadic %args)
    irdl.results(res: %res)
    irdl.attributes { "fn" = %fn }
  }
}
