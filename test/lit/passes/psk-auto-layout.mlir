// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-auto-layout{bytes=32 workers=1})' --split-input-file | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-auto-layout{bytes=32 workers=1},psk-verify)' --split-input-file | FileCheck %s --check-prefix=VERIFIED

// The 4x4x4 product leaves its default rowwise nest for the point the cost model prices
// cheapest for 32-byte vectors on one worker (the same bits at every point).
// CHECK-LABEL: func.func @k0.dot(
// CHECK-SAME:    psk_kernel.layout = {form = "tiled", kblock = 0 : i64, lanes = 1 : i64, order = "IJ", pack = "none", tile = array<i64: 1, 4>}
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

// -----

// A masked softmax leaves its default three-pass form for the two-pass form, which calls
// exp once an element, not twice (the same bits in both forms): four calls, one for each
// of the four rows it computes at a time.
// CHECK-LABEL: func.func @k1.softmax(
// CHECK-SAME:    psk_kernel.layout = {form = "two-pass"
// CHECK:         "psk_kernel.scratch"
// CHECK-COUNT-4: {fn = "exp"}
// CHECK-NOT:     {fn = "exp"}
// VERIFIED:      "psk_kernel.launch"
module attributes {psk.dims = {N = 8 : i64}, psk.entry = @softmax_masked, psk.params = [], psk.program = "tests/data/prims.psk", psk_kernel.type = "f32"} {
  func.func @softmax_masked(%arg0: !psk.real<array<i64: 8, 8>, ["s", "t"]> {psk.name = "a"}) -> !psk.real<array<i64: 8, 8>, ["s", "t"]> attributes {psk.function = "softmax_masked"} {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk_kernel.launch"(%0) {kernel = @k0.causal_mask, psk.site = "softmax_masked/%0"} : (tuple<>) -> !psk.bool<array<i64: 8, 8>, ["s", "t"]>
    %2 = "psk.tuple_empty"() : () -> tuple<>
    %3 = "psk.tuple_append"(%2, %arg0) : (tuple<>, !psk.real<array<i64: 8, 8>, ["s", "t"]>) -> tuple<!psk.real<array<i64: 8, 8>, ["s", "t"]>>
    %4 = "psk.tuple_append"(%3, %1) : (tuple<!psk.real<array<i64: 8, 8>, ["s", "t"]>>, !psk.bool<array<i64: 8, 8>, ["s", "t"]>) -> tuple<!psk.real<array<i64: 8, 8>, ["s", "t"]>, !psk.bool<array<i64: 8, 8>, ["s", "t"]>>
    %5 = "psk_kernel.launch"(%4) {kernel = @k1.softmax, psk.site = "softmax_masked/%1"} : (tuple<!psk.real<array<i64: 8, 8>, ["s", "t"]>, !psk.bool<array<i64: 8, 8>, ["s", "t"]>>) -> !psk.real<array<i64: 8, 8>, ["s", "t"]>
    return %5 : !psk.real<array<i64: 8, 8>, ["s", "t"]>
  }
  func.func @k0.causal_mask(%arg0: !psk_kernel.buffer<i8, array<i64: 8, 8>, ["s", "t"]>) attributes {psk_kernel.kernel = "causal_mask", psk_kernel.ops = 1 : i64, psk_kernel.type = "f32"} {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    scf.for %arg1 = %c0 to %c8 step %c1 {
      scf.for %arg2 = %c0 to %c8 step %c1 {
        %0 = arith.cmpi sle, %arg2, %arg1 : index
        %1 = arith.extui %0 : i1 to i8
        "psk_kernel.store"(%1, %arg0, %arg1, %arg2) : (i8, !psk_kernel.buffer<i8, array<i64: 8, 8>, ["s", "t"]>, index, index) -> ()
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  func.func @k1.softmax(%arg0: !psk_kernel.buffer<f32, array<i64: 8, 8>, ["s", "t"]>, %arg1: !psk_kernel.buffer<i8, array<i64: 8, 8>, ["s", "t"]>, %arg2: !psk_kernel.buffer<f32, array<i64: 8, 8>, ["s", "t"]>) attributes {psk_kernel.kernel = "softmax", psk_kernel.layout = {form = "three-pass", kblock = 0 : i64, lanes = 1 : i64, order = "IJ", pack = "none", tile = array<i64: 1, 1>}, psk_kernel.ops = 1 : i64, psk_kernel.rows = {axis = 1 : i64}, psk_kernel.type = "f32"} {
    %cst = arith.constant 0.000000e+00 : f32
    %c0_i8 = arith.constant 0 : i8
    %cst_0 = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    scf.for %arg3 = %c0 to %c8 step %c1 {
      %0 = scf.for %arg4 = %c0 to %c8 step %c1 iter_args(%arg5 = %cst_0) -> (f32) {
        %2 = "psk_kernel.load"(%arg0, %arg3, %arg4) : (!psk_kernel.buffer<f32, array<i64: 8, 8>, ["s", "t"]>, index, index) -> f32
        %3 = arith.cmpf ogt, %2, %arg5 : f32
        %4 = "psk_kernel.load"(%arg1, %arg3, %arg4) : (!psk_kernel.buffer<i8, array<i64: 8, 8>, ["s", "t"]>, index, index) -> i8
        %5 = arith.cmpi ne, %4, %c0_i8 : i8
        %6 = arith.andi %5, %3 : i1
        %7 = arith.select %6, %2, %arg5 : f32
        scf.yield %7 : f32
      }
      %1 = scf.for %arg4 = %c0 to %c8 step %c1 iter_args(%arg5 = %cst) -> (f32) {
        %2 = "psk_kernel.load"(%arg0, %arg3, %arg4) : (!psk_kernel.buffer<f32, array<i64: 8, 8>, ["s", "t"]>, index, index) -> f32
        %3 = arith.subf %2, %0 : f32
        %4 = "psk_kernel.call"(%3) {fn = "exp"} : (f32) -> f32
        %5 = "psk_kernel.load"(%arg1, %arg3, %arg4) : (!psk_kernel.buffer<i8, array<i64: 8, 8>, ["s", "t"]>, index, index) -> i8
        %6 = arith.cmpi ne, %5, %c0_i8 : i8
        %7 = arith.select %6, %4, %cst : f32
        %8 = arith.addf %arg5, %7 : f32
        scf.yield %8 : f32
      }
      scf.for %arg4 = %c0 to %c8 step %c1 {
        %2 = "psk_kernel.load"(%arg0, %arg3, %arg4) : (!psk_kernel.buffer<f32, array<i64: 8, 8>, ["s", "t"]>, index, index) -> f32
        %3 = arith.subf %2, %0 : f32
        %4 = "psk_kernel.call"(%3) {fn = "exp"} : (f32) -> f32
        %5 = "psk_kernel.load"(%arg1, %arg3, %arg4) : (!psk_kernel.buffer<i8, array<i64: 8, 8>, ["s", "t"]>, index, index) -> i8
        %6 = arith.cmpi ne, %5, %c0_i8 : i8
        %7 = arith.select %6, %4, %cst : f32
        %8 = arith.divf %7, %1 : f32
        "psk_kernel.store"(%8, %arg2, %arg3, %arg4) : (f32, !psk_kernel.buffer<f32, array<i64: 8, 8>, ["s", "t"]>, index, index) -> ()
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
}
