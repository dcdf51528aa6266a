// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-auto-layout{bytes=32 workers=1})' | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-auto-layout{bytes=32 workers=1},psk-verify)' | FileCheck %s --check-prefix=VERIFIED

// The 4x4x4 product leaves its default rowwise nest for the point the cost model prices
// cheapest for 32-byte vectors on one worker (the same bits at every point).
// CHECK-LABEL: func.func @k0.dot(
// CHECK-SAME:    psk_kernel.layout = {form = "tiled", kblock = 0 : i64, lanes = 1 : i64, order = "JI", pack = "none", tile = array<i64: 1, 4>}
// CHECK-NOT:     form = "rowwise"
// VERIFIED:      "psk_kernel.launch"
module attributes {psk.dims = {I = 4 : i64, J = 4 : i64, K = 4 : i64}, psk.entry = @dot_big, psk.params = [], psk.program = "tests/data/layouts.psk", psk_kernel.type = "f32"} {
  func.func @dot_big(%arg0: !psk.real<array<i64: 4, 4>, ["I", "K"]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 4, 4>, ["K", "J"]> {psk.name = "w"}) -> !psk.real<array<i64: 4, 4>, ["I", "J"]> attributes {psk.function = "dot_big"} {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk.tuple_append"(%0, %arg0) : (tuple<>, !psk.real<array<i64: 4, 4>, ["I", "K"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>>
    %2 = "psk.tuple_append"(%1, %arg1) : (tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>>, !psk.real<array<i64: 4, 4>, ["K", "J"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>, !psk.real<array<i64: 4, 4>, ["K", "J"]>>
    %3 = "psk_kernel.launch"(%2) {kernel = @k0.dot, psk.site = "dot_big/%0"} : (tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>, !psk.real<array<i64: 4, 4>, ["K", "J"]>>) -> !psk.real<array<i64: 4, 4>, ["I", "J"]>
    return %3 : !psk.real<array<i64: 4, 4>, ["I", "J"]>
  }
  func.func @k0.dot(%arg0: !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "K"]>, %arg1: !psk_kernel.buffer<f32, array<i64: 4, 4>, ["K", "J"]>, %arg2: !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>) attributes {psk_kernel.contraction = {a = ["o0", "k0"], b = ["k0", "o1"], k = array<i64: 4>, kind = "dot"}, psk_kernel.kernel = "dot", psk_kernel.layout = {form = "rowwise", kblock = 0 : i64, lanes = 1 : i64, order = "IJ", pack = "none", tile = array<i64: 1, 1>}, psk_kernel.ops = 1 : i64, psk_kernel.type = "f32"} {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    scf.for %arg3 = %c0 to %c4 step %c1 {
      scf.for %arg4 = %c0 to %c4 step %c1 {
        "psk_kernel.store"(%cst, %arg2, %arg3, %arg4) : (f32, !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>, index, index) -> ()
      } {psk_kernel.parallel}
      scf.for %arg4 = %c0 to %c4 step %c1 {
        %0 = "psk_kernel.load"(%arg0, %arg3, %arg4) : (!psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "K"]>, index, index) -> f32
        scf.for %arg5 = %c0 to %c4 step %c1 {
          %1 = "psk_kernel.load"(%arg1, %arg4, %arg5) : (!psk_kernel.buffer<f32, array<i64: 4, 4>, ["K", "J"]>, index, index) -> f32
          %2 = "psk_kernel.load"(%arg2, %arg3, %arg5) : (!psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>, index, index) -> f32
          %3 = arith.mulf %0, %1 : f32
          %4 = arith.addf %2, %3 : f32
          "psk_kernel.store"(%4, %arg2, %arg3, %arg5) : (f32, !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>, index, index) -> ()
        } {psk_kernel.parallel}
      }
    } {psk_kernel.parallel}
    return
  }
}
