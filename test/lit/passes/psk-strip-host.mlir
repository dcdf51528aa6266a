// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-strip-host)' | FileCheck %s

// The host function (PSK types, a launch) goes; the kernel and a plain function over
// builtin types stay, ready for the LLVM lowering.
// CHECK-NOT:   func.func @host
// CHECK-LABEL: func.func @k0.neg(
// CHECK-LABEL: func.func @main()
// CHECK-NOT:   psk.
module {
  func.func @host(%arg0: !psk.real<array<i64: 4>, [""]>) -> !psk.real<array<i64: 4>, [""]> {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk.tuple_append"(%0, %arg0) : (tuple<>, !psk.real<array<i64: 4>, [""]>) -> tuple<!psk.real<array<i64: 4>, [""]>>
    %2 = "psk_kernel.launch"(%1) {kernel = @k0.neg, psk.site = "host/%0"} : (tuple<!psk.real<array<i64: 4>, [""]>>) -> !psk.real<array<i64: 4>, [""]>
    return %2 : !psk.real<array<i64: 4>, [""]>
  }
  func.func @k0.neg(%arg0: memref<4xf64>, %arg1: memref<4xf64>, %arg2: index, %arg3: index) attributes {psk_kernel.kernel = "neg", psk_kernel.split = 4 : i64, psk_kernel.type = "f64", psk_kernel.work = 12 : i64} {
    affine.for %i = %arg2 to %arg3 {
      %0 = affine.load %arg0[%i] : memref<4xf64>
      %1 = arith.negf %0 : f64
      affine.store %1, %arg1[%i] : memref<4xf64>
    } {psk_kernel.parallel}
    return
  }
  func.func @main() {
    return
  }
}
