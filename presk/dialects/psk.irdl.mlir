// PSK-Core: the `psk` dialect. Tensors carry their named axes in their type.
//
// Types
//   !psk.real<array<i64: 4, 2>, ["batch", ""]>   a real tensor: shape, then one name per
//                                               axis ("" for a positional axis); rank 0 is a scalar
//   !psk.index<...>, !psk.bool<...>             index (token, nat) and mask tensors, same parameters
//   !psk.record<["w", "b"], [T1, T2]>           a record (parameter trees, named results)
//   tuples are builtin `tuple<...>`
//
// `psk.dropout` may carry `psk.key`: the site whose draws it repeats (a derivative's).
// Calls, folds and derivatives carry `psk.callsite`, which keys the draws inside them.
//
// IRDL checks arity and the kinds of operands; the named-axis rules of every op live in
// presk/prims (run by the `psk-verify` pass). Every compute op carries `psk.site`
// ("<function>/%<n>"), the key realizations, envelopes and plans use.
irdl.dialect @psk {
  irdl.type @real {
    %shape = irdl.base "#builtin.dense_array"
    %names = irdl.base "#builtin.array"
    irdl.parameters(shape: %shape, names: %names)
  }
  irdl.type @index {
    %shape = irdl.base "#builtin.dense_array"
    %names = irdl.base "#builtin.array"
    irdl.parameters(shape: %shape, names: %names)
  }
  irdl.type @bool {
    %shape = irdl.base "#builtin.dense_array"
    %names = irdl.base "#builtin.array"
    irdl.parameters(shape: %shape, names: %names)
  }
  irdl.type @record {
    %names = irdl.base "#builtin.array"
    %types = irdl.base "#builtin.array"
    irdl.parameters(names: %names, types: %types)
  }

  // ---- values
  // a scalar literal, kept as exact decimal text; result real or index
  irdl.operation @const {
    %v0 = irdl.any
    %a0 = irdl.base "#builtin.string"
    irdl.results(res: %v0)
    irdl.attributes { "value" = %a0 }
  }
  // an index (nat) value read as a real
  irdl.operation @to_real {
    %v0 = irdl.base @psk::@index
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  // mask[i, j] = j <= i over the two named axes `names` of sizes `sizes`
  irdl.operation @causal_mask {
    %v0 = irdl.base @psk::@bool
    %a0 = irdl.base "#builtin.array"
    %a1 = irdl.base "#builtin.dense_array"
    irdl.results(res: %v0)
    irdl.attributes { "names" = %a0, "sizes" = %a1 }
  }
  // ---- elementwise, broadcasting by axis name
  irdl.operation @neg {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @exp {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @log {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @sqrt {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @tanh {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @sin {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @cos {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @erf {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @abs {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @gelu {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @relu {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @sign {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  irdl.operation @add {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @sub {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @mul {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @div {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @max {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @min {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  // lhs raised to rhs
  irdl.operation @pow {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  // lhs > rhs, a mask
  irdl.operation @gt {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@bool
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @select {
    %v0 = irdl.base @psk::@bool
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    %v3 = irdl.base @psk::@real
    irdl.operands(cond: %v0, then: %v1, else: %v2)
    irdl.results(res: %v3)
  }
  // ---- contractions
  // lhs's last axis against rhs's first
  irdl.operation @dot {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  // [..., I, K] x [..., K, J]
  irdl.operation @matmul {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  // axes matched by name; `axes` is the output's order
  irdl.operation @ein {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.array"
    irdl.operands(lhs: %v0, rhs: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "axes" = %a0 }
  }
  // ---- reductions and row-wise ops
  irdl.operation @sum {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.dense_array"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "axes" = %a0 }
  }
  irdl.operation @mean {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.dense_array"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "axes" = %a0 }
  }
  irdl.operation @reduce_max {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.dense_array"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "axes" = %a0 }
  }
  // the last of equal maxima
  irdl.operation @argmax {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@index
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "axis" = %a0 }
  }
  // row maximum subtracted; a mask refuses positions
  irdl.operation @softmax {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@bool
    %v2 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(x: %v0, mask: optional %v1)
    irdl.results(res: %v2)
    irdl.attributes { "axis" = %a0 }
  }
  irdl.operation @cross_entropy {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@index
    %v2 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(logits: %v0, targets: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "axis" = %a0 }
  }
  // gather rows of table
  irdl.operation @embed {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@index
    %v2 = irdl.base @psk::@real
    irdl.operands(table: %v0, tokens: %v1)
    irdl.results(res: %v2)
  }
  // draw from softmax(logits) on the host
  irdl.operation @sample {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@index
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(logits: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "axis" = %a0 }
  }
  // mask from the site's key in training, identity otherwise
  irdl.operation @dropout {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.string"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "rate" = %a0 }
  }
  // ---- derivatives (psk-vjp emits them; docs/language.md, Differentiation)
  // Σ over rhs's trailing axes of ct · rhs: the lhs cotangent of a dot
  irdl.operation @dot_vjp_l {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(ct: %v0, rhs: %v1)
    irdl.results(res: %v2)
  }
  // Σ over lhs's leading axes, as one, of lhs · ct: the rhs cotangent of a dot
  irdl.operation @dot_vjp_r {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    irdl.operands(lhs: %v0, ct: %v1)
    irdl.results(res: %v2)
  }
  // x repeated along the axes of `like` at positions `axes`
  irdl.operation @expand {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.any
    %v2 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.dense_array"
    irdl.operands(x: %v0, like: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "axes" = %a0 }
  }
  // ct at the last maximum of x along `axes`, 0 elsewhere
  irdl.operation @reduce_max_vjp {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %v2 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.dense_array"
    irdl.operands(x: %v0, ct: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "axes" = %a0 }
  }
  // (softmax(logits) - onehot(targets)) · ct
  irdl.operation @cross_entropy_vjp {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@index
    %v2 = irdl.base @psk::@real
    %v3 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(logits: %v0, targets: %v1, ct: %v2)
    irdl.results(res: %v3)
    irdl.attributes { "axis" = %a0 }
  }
  // ct's rows added into a table of `rows` rows at the tokens, in order
  irdl.operation @embed_vjp {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@index
    %v2 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(ct: %v0, tokens: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "rows" = %a0 }
  }
  // ---- axis plumbing
  // [..., S, D] -> [..., heads: H, S, hd: D/H]
  irdl.operation @split_heads {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "heads" = %a0 }
  }
  // [..., heads: H, S, hd: E] -> [..., S, H*E]
  irdl.operation @merge_heads {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.base @psk::@real
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
  }
  // the same elements, the axes named `names` ("" for positional)
  irdl.operation @rename {
    %v0 = irdl.any
    %v1 = irdl.any
    %a0 = irdl.base "#builtin.array"
    irdl.operands(x: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "names" = %a0 }
  }
  // sum x down to like's axes (broadcasting's adjoint)
  irdl.operation @sum_to {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.any
    %v2 = irdl.base @psk::@real
    irdl.operands(x: %v0, like: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @broadcast_like {
    %v0 = irdl.base @psk::@real
    %v1 = irdl.any
    %v2 = irdl.base @psk::@real
    irdl.operands(x: %v0, like: %v1)
    irdl.results(res: %v2)
  }
  // ---- structure: records, tuples, stacks, calls of transformed functions
  // IRDL unifies the types of a variadic group, so records and tuples are built a field
  // at a time: record_empty, then set_field (which adds or replaces one field).
  irdl.operation @record_empty {
    %v0 = irdl.base @psk::@record
    irdl.results(res: %v0)
  }
  irdl.operation @set_field {
    %v0 = irdl.base @psk::@record
    %v1 = irdl.any
    %v2 = irdl.base @psk::@record
    %a0 = irdl.base "#builtin.string"
    irdl.operands(rec: %v0, value: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "name" = %a0 }
  }
  irdl.operation @field {
    %v0 = irdl.any
    %v1 = irdl.any
    %a0 = irdl.base "#builtin.string"
    irdl.operands(rec: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "name" = %a0 }
  }
  irdl.operation @tuple_empty {
    %v0 = irdl.base "!builtin.tuple"
    irdl.results(res: %v0)
  }
  irdl.operation @tuple_append {
    %v0 = irdl.base "!builtin.tuple"
    %v1 = irdl.any
    %v2 = irdl.base "!builtin.tuple"
    irdl.operands(tup: %v0, value: %v1)
    irdl.results(res: %v2)
  }
  irdl.operation @get {
    %v0 = irdl.any
    %v1 = irdl.any
    %a0 = irdl.base "#builtin.integer"
    irdl.operands(tup: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "index" = %a0 }
  }
  // carry = callee(layer, carry) for each layer of a stack in order: `stack` is the record
  // of the stacked parameters, each leaf with the layers as its leading axis, and layer l
  // is that record with every leaf taken at l
  irdl.operation @fold {
    %v0 = irdl.base @psk::@record
    %v1 = irdl.any
    %v2 = irdl.any
    %a0 = irdl.base "#builtin.symbol_ref"
    irdl.operands(stack: %v0, carry: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "callee" = %a0 }
  }
  // a fold whose callee returns (carry, residuals): gives (carry, the layers' residuals)
  irdl.operation @fold_fwd {
    %v0 = irdl.base @psk::@record
    %v1 = irdl.any
    %v2 = irdl.base "!builtin.tuple"
    %a0 = irdl.base "#builtin.symbol_ref"
    irdl.operands(stack: %v0, carry: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "callee" = %a0 }
  }
  // the reverse fold: callee(residuals_l, ct) -> (layer cotangent, carry cotangent) from
  // the last layer to the first; gives (the stacked layer cotangents, the carry's)
  irdl.operation @fold_bwd {
    %v0 = irdl.base "!builtin.tuple"
    %v1 = irdl.any
    %v2 = irdl.base "!builtin.tuple"
    %a0 = irdl.base "#builtin.symbol_ref"
    irdl.operands(residuals: %v0, ct: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "callee" = %a0 }
  }
  // gradient of a scalar function w.r.t. its parameter tree, at the arguments in `args`
  // (psk-vjp expands it)
  irdl.operation @grad {
    %v0 = irdl.base "!builtin.tuple"
    %v1 = irdl.any
    %a0 = irdl.base "#builtin.symbol_ref"
    irdl.operands(args: %v0)
    irdl.results(res: %v1)
    irdl.attributes { "callee" = %a0 }
  }
  // pullback of a function at the arguments in `args`, applied to a cotangent
  irdl.operation @vjp {
    %v0 = irdl.base "!builtin.tuple"
    %v1 = irdl.any
    %v2 = irdl.any
    %a0 = irdl.base "#builtin.symbol_ref"
    irdl.operands(args: %v0, cotangent: %v1)
    irdl.results(res: %v2)
    irdl.attributes { "callee" = %a0 }
  }
}
