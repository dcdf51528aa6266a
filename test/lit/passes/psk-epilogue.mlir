// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-epilogue,psk-dce)' | FileCheck %s
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-epilogue{nest=Linear.apply/%%1})' 2>&1 | FileCheck %s --check-prefix=BAD

// x · w + b: one launch of the dot's kernel with b as a third input, keeping the dot's
// site (its nest) and noting the add's. The add's kernel is gone.
// CHECK:       "psk_kernel.launch"(%{{.*}}) {kernel = @k0.dot.bias, psk.site = "Linear.apply/%0", psk_kernel.epilogue_site = "Linear.apply/%1"}
// CHECK-NOT:   "psk_kernel.launch"
// CHECK-NOT:   func.func @k1.add
// CHECK-LABEL: func.func @k0.dot.bias(%arg0: !psk_kernel.buffer<bf16, array<i64: 4, 3>, ["batch", ""]>, %arg1: !psk_kernel.buffer<bf16, array<i64: 3, 2>, ["", ""]>, %arg2: !psk_kernel.buffer<bf16, array<i64: 2>, [""]>, %arg3: !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>)
// CHECK-SAME:    psk_kernel.epilogue = {input = 2 : i64}
// CHECK-SAME:    psk_kernel.layout = {epilogue,
// In bf16 the product is stored and read back before the bias is added, as the add's
// kernel read it.
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} iter_args(
// CHECK:         "psk_kernel.store"(%[[SUM]], %arg3, %[[I:[a-z0-9]+]], %[[J:[a-z0-9]+]])
// CHECK-NEXT:    %[[T:.*]] = "psk_kernel.load"(%arg3, %[[I]], %[[J]]) {{.*}} -> f32
// CHECK-NEXT:    %[[B:.*]] = "psk_kernel.load"(%arg2, %[[J]]) {{.*}} -> f32
// CHECK-NEXT:    %[[Y:.*]] = arith.addf %[[T]], %[[B]] : f32
// CHECK-NEXT:    "psk_kernel.store"(%[[Y]], %arg3, %[[I]], %[[J]])

// BAD: error[E7001]: no contraction at nest Linear.apply/%1
module attributes {psk.dims = {batch = 4 : i64}, psk.entry = @"Linear{3, 2}.apply", psk.module = "Linear{3, 2}", psk.params = [{init = "normal", path = "w", scale = "1 / sqrt(3)"}, {init = "zeros", path = "b"}], psk.program = "tutorial/01_linear.psk", psk_kernel.type = "bf16"} {
  func.func @"Linear{3, 2}.apply"(%arg0: !psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]> {psk.name = "params"}, %arg1: !psk.real<array<i64: 4, 3>, ["batch", ""]> {psk.name = "x"}) -> !psk.real<array<i64: 4, 2>, ["batch", ""]> attributes {psk.function = "Linear.apply"} {
    %0 = "psk.field"(%arg0) {name = "w"} : (!psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>) -> !psk.real<array<i64: 3, 2>, ["", ""]>
    %1 = "psk.tuple_empty"() : () -> tuple<>
    %2 = "psk.tuple_append"(%1, %arg1) : (tuple<>, !psk.real<array<i64: 4, 3>, ["batch", ""]>) -> tuple<!psk.real<array<i64: 4, 3>, ["batch", ""]>>
    %3 = "psk.tuple_append"(%2, %0) : (tuple<!psk.real<array<i64: 4, 3>, ["batch", ""]>>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> tuple<!psk.real<array<i64: 4, 3>, ["batch", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>>
    %4 = "psk_kernel.launch"(%3) {kernel = @k0.dot, psk.site = "Linear.apply/%0"} : (tuple<!psk.real<array<i64: 4, 3>, ["batch", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
    %5 = "psk.field"(%arg0) {name = "b"} : (!psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>) -> !psk.real<array<i64: 2>, [""]>
    %6 = "psk.tuple_empty"() : () -> tuple<>
    %7 = "psk.tuple_append"(%6, %4) : (tuple<>, !psk.real<array<i64: 4, 2>, ["batch", ""]>) -> tuple<!psk.real<array<i64: 4, 2>, ["batch", ""]>>
    %8 = "psk.tuple_append"(%7, %5) : (tuple<!psk.real<array<i64: 4, 2>, ["batch", ""]>>, !psk.real<array<i64: 2>, [""]>) -> tuple<!psk.real<array<i64: 4, 2>, ["batch", ""]>, !psk.real<array<i64: 2>, [""]>>
    %9 = "psk_kernel.launch"(%8) {kernel = @k1.add, psk.site = "Linear.apply/%1"} : (tuple<!psk.real<array<i64: 4, 2>, ["batch", ""]>, !psk.real<array<i64: 2>, [""]>>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
    return %9 : !psk.real<array<i64: 4, 2>, ["batch", ""]>
  }
  func.func @k0.dot(%arg0: !psk_kernel.buffer<bf16, array<i64: 4, 3>, ["batch", ""]>, %arg1: !psk_kernel.buffer<bf16, array<i64: 3, 2>, ["", ""]>, %arg2: !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>) attributes {psk_kernel.contraction = {a = ["o0", "k0"], b = ["k0", "o1"], k = array<i64: 3>, kind = "dot"}, psk_kernel.kernel = "dot", psk_kernel.layout = {form = "tiled", kblock = 0 : i64, lanes = 1 : i64, order = "IJ", pack = "none", tile = array<i64: 1, 1>}, psk_kernel.ops = 1 : i64, psk_kernel.type = "bf16"} {
    %c3 = arith.constant 3 : index
    %cst = arith.constant 0.000000e+00 : f32
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    scf.for %arg3 = %c0 to %c4 step %c1 {
      scf.for %arg4 = %c0 to %c2 step %c1 {
        %0 = scf.for %arg5 = %c0 to %c3 step %c1 iter_args(%arg6 = %cst) -> (f32) {
          %1 = "psk_kernel.load"(%arg0, %arg3, %arg5) : (!psk_kernel.buffer<bf16, array<i64: 4, 3>, ["batch", ""]>, index, index) -> f32
          %2 = "psk_kernel.load"(%arg1, %arg5, %arg4) : (!psk_kernel.buffer<bf16, array<i64: 3, 2>, ["", ""]>, index, index) -> f32
          %3 = arith.mulf %1, %2 : f32
          %4 = arith.addf %arg6, %3 : f32
          scf.yield %4 : f32
        }
        "psk_kernel.store"(%0, %arg2, %arg3, %arg4) : (f32, !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, index, index) -> ()
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  func.func @k1.add(%arg0: !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, %arg1: !psk_kernel.buffer<bf16, array<i64: 2>, [""]>, %arg2: !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>) attributes {psk_kernel.kernel = "add", psk_kernel.ops = 1 : i64, psk_kernel.type = "bf16"} {
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    scf.for %arg3 = %c0 to %c4 step %c1 {
      scf.for %arg4 = %c0 to %c2 step %c1 {
        %0 = "psk_kernel.load"(%arg0, %arg3, %arg4) : (!psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, index, index) -> f32
        %1 = "psk_kernel.load"(%arg1, %arg4) : (!psk_kernel.buffer<bf16, array<i64: 2>, [""]>, index) -> f32
        %2 = arith.addf %0, %1 : f32
        "psk_kernel.store"(%2, %arg2, %arg3, %arg4) : (f32, !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, index, index) -> ()
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
}
