// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-contract{contract=fma})' | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-contract{nest=dot_big/%%0 contract=fma},psk-contract{nest=dot_big/%%0 contract=none})' | FileCheck %s --check-prefix=NONE
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-contract{nest=dot_big/%%1})' 2>&1 | FileCheck %s --check-prefix=BAD

// fma: the row-wise dot built again, each acc + a·b one math.fma, and its layout says so.
// CHECK-LABEL: func.func @k0.dot(
// CHECK-SAME:    fma, form = "rowwise"
// CHECK:         %[[A:.*]] = "psk_kernel.load"(%arg0
// CHECK:         %[[B:.*]] = "psk_kernel.load"(%arg1
// CHECK:         %[[ACC:.*]] = "psk_kernel.load"(%arg2
// CHECK-NEXT:    %[[F:.*]] = math.fma %[[A]], %[[B]], %[[ACC]] : f32
// CHECK-NEXT:    "psk_kernel.store"(%[[F]], %arg2
// CHECK-NOT:     arith.mulf

// none, after fma at the same nest: the product and the sum each rounded again.
// NONE-LABEL: func.func @k0.dot(
// NONE-NOT:     fma
// NONE:         arith.mulf
// NONE-NEXT:    arith.addf

// BAD: error[E7001]: no contraction or softmax at nest dot_big/%1 (nests: dot_big/%0)
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
