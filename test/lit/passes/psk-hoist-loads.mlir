// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-hoist-loads)' | FileCheck %s

// CHECK-LABEL: func.func @k0.scale(
// CHECK-NEXT:    affine.for %[[I:.*]] = %arg3 to %arg4 {
// CHECK-NEXT:      %[[W:.*]] = affine.load %arg1[%[[I]]] : memref<4xbf16>
// CHECK-NEXT:      %[[WF:.*]] = arith.extf %[[W]] : bf16 to f32
// CHECK-NEXT:      %[[W2:.*]] = arith.mulf %[[WF]], %[[WF]] : f32
// CHECK-NEXT:      affine.for %[[J:.*]] = 0 to 8 {
// CHECK-NEXT:        affine.load %arg0[%[[I]], %[[J]]]
// CHECK-NEXT:        arith.extf
// CHECK-NEXT:        arith.mulf %{{.*}}, %[[W2]] : f32
// CHECK-NEXT:        affine.load %arg2[%[[I]], 0] : memref<4x8xbf16>
// CHECK:             affine.store

// CHECK-LABEL: func.func @k1.bias(
// CHECK-NEXT:    %[[B:.*]] = affine.load %arg1[] : memref<f64>
// CHECK-NEXT:    affine.for
// CHECK-NEXT:      affine.for
// CHECK-NEXT:        affine.load %arg0
// CHECK-NEXT:        arith.addf %{{.*}}, %[[B]] : f64

module {
  // %arg1 is only read: its element at [%i] is the same for every %j and moves out of the
  // %j loop with its widening; the output %arg2 is written, so its load stays.
  func.func @k0.scale(%arg0: memref<4x8xbf16>, %arg1: memref<4xbf16>, %arg2: memref<4x8xbf16>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "mul", psk_kernel.type = "bf16", psk_kernel.split = 4 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 8 {
        %0 = affine.load %arg0[%i, %j] : memref<4x8xbf16>
        %1 = arith.extf %0 : bf16 to f32
        %2 = affine.load %arg1[%i] : memref<4xbf16>
        %3 = arith.extf %2 : bf16 to f32
        %4 = arith.mulf %3, %3 : f32
        %5 = arith.mulf %1, %4 : f32
        %6 = affine.load %arg2[%i, 0] : memref<4x8xbf16>
        %7 = arith.extf %6 : bf16 to f32
        %8 = arith.addf %5, %7 : f32
        %9 = arith.truncf %8 : f32 to bf16
        affine.store %9, %arg2[%i, %j] : memref<4x8xbf16>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  // An invariant of two nested loops climbs out of both.
  func.func @k1.bias(%arg0: memref<2x3xf64>, %arg1: memref<f64>, %arg2: memref<2x3xf64>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "add", psk_kernel.type = "f64", psk_kernel.split = 2 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 3 {
        %b = affine.load %arg1[] : memref<f64>
        %x = affine.load %arg0[%i, %j] : memref<2x3xf64>
        %s = arith.addf %x, %b : f64
        affine.store %s, %arg2[%i, %j] : memref<2x3xf64>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
}
