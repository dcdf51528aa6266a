// RUN: presk-opt %s | FileCheck %s
// RUN: presk-opt %s | mlir-opt --irdl-file=%psk_kernel_irdl | FileCheck %s

// An elementwise kernel: loads, a C library call, a store, in an scf loop.
// CHECK-LABEL: func.func @exp_kernel
// CHECK-SAME:    attributes {psk_kernel.kernel = "exp"}
// CHECK:         scf.for %[[I:.*]] =
// CHECK-NEXT:      %[[X:.*]] = "psk_kernel.load"(%arg0, %[[I]]) : (!psk_kernel.buffer<f32, array<i64: 4>, ["batch"]>, index) -> f32
// CHECK-NEXT:      %[[Y:.*]] = "psk_kernel.call"(%[[X]]) {fn = "exp"} : (f32) -> f32
// CHECK-NEXT:      "psk_kernel.store"(%[[Y]], %arg1, %[[I]])
func.func @exp_kernel(%a: !psk_kernel.buffer<f32, array<i64: 4>, ["batch"]>, %o: !psk_kernel.buffer<f32, array<i64: 4>, ["batch"]>) attributes {psk_kernel.kernel = "exp"} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %x = "psk_kernel.load"(%a, %i) : (!psk_kernel.buffer<f32, array<i64: 4>, ["batch"]>, index) -> f32
    %y = "psk_kernel.call"(%x) {fn = "exp"} : (f32) -> f32
    "psk_kernel.store"(%y, %o, %i) : (f32, !psk_kernel.buffer<f32, array<i64: 4>, ["batch"]>, index) -> ()
  }
  return
}

// A bf16 buffer read by an f32 nest widens at the load.
// CHECK-LABEL: func.func @widen
// CHECK:         "psk_kernel.load"(%arg0, %{{.*}}, %{{.*}}) : (!psk_kernel.buffer<bf16, array<i64: 2, 2>, ["", ""]>, index, index) -> f32
func.func @widen(%w: !psk_kernel.buffer<bf16, array<i64: 2, 2>, ["", ""]>, %o: !psk_kernel.buffer<f32, array<i64>, []>) {
  %c0 = arith.constant 0 : index
  %x = "psk_kernel.load"(%w, %c0, %c0) : (!psk_kernel.buffer<bf16, array<i64: 2, 2>, ["", ""]>, index, index) -> f32
  "psk_kernel.store"(%x, %o) : (f32, !psk_kernel.buffer<f32, array<i64>, []>) -> ()
  return
}
