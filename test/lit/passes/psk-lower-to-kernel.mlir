// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-lower-to-kernel{type=f64},psk-verify)' | FileCheck %s
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-lower-to-kernel{type=f16})' 2>&1 | FileCheck %s --check-prefix=BAD

// The dot becomes a launch of a kernel over f64 buffers: the host keeps its site, the
// kernel is a loop nest of scf.for, psk_kernel.load/store and arith.
// CHECK:      %[[T:.*]] = "psk.tuple_append"(%{{.*}}, %arg1)
// CHECK-NEXT: "psk_kernel.launch"(%[[T]]) {kernel = @k0.dot, psk.site = "dot_rows/%0"} : (tuple<{{.*}}>) -> !psk.real<array<i64: 2, 2>, ["N", ""]>
// CHECK:      func.func @k0.dot(%arg0: !psk_kernel.buffer<f64, array<i64: 2, 3>, ["N", ""]>, %arg1: !psk_kernel.buffer<f64, array<i64: 3, 2>, ["", ""]>, %arg2: !psk_kernel.buffer<f64, array<i64: 2, 2>, ["N", ""]>)
// A contraction keeps its nest and its point of the layout space, for the layout passes.
// CHECK-SAME:   psk_kernel.contraction = {a = ["o0", "k0"], b = ["k0", "o1"], k = array<i64: 3>, kind = "dot"}
// CHECK-SAME:   psk_kernel.kernel = "dot"
// CHECK-SAME:   psk_kernel.layout = {form = "rowwise", kblock = 0 : i64, lanes = 1 : i64, order = "IJ", pack = "none", tile = array<i64: 1, 1>}
// CHECK-SAME:   psk_kernel.ops = 1 : i64, psk_kernel.type = "f64"}
// CHECK:        scf.for
// CHECK:        } {psk_kernel.parallel}
// CHECK:        "psk_kernel.load"(%arg0
// CHECK:        arith.mulf
// CHECK-NEXT:   arith.addf

// BAD: error[E0001]: psk-lower-to-kernel: type is f64, f32 or bf16, not 'f16'
module attributes {psk.dims = {N = 2 : i64}, psk.entry = @dot_rows, psk.params = [], psk.program = "families.psk"} {
  func.func @dot_rows(%arg0: !psk.real<array<i64: 2, 3>, ["N", ""]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 3, 2>, ["", ""]> {psk.name = "w"}) -> !psk.real<array<i64: 2, 2>, ["N", ""]> attributes {psk.function = "dot_rows"} {
    %0 = "psk.dot"(%arg0, %arg1) {psk.site = "dot_rows/%0"} : (!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> !psk.real<array<i64: 2, 2>, ["N", ""]>
    return %0 : !psk.real<array<i64: 2, 2>, ["N", ""]>
  }
}
