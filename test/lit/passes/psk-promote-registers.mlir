// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-promote-registers)' | FileCheck %s

// CHECK-LABEL: func.func @k0.rowsum(
// CHECK:         affine.store %cst, %arg1[%[[I:.*]]] : memref<4xbf16>
// CHECK-NEXT:    %[[INIT:.*]] = affine.load %arg1[%[[I]]] : memref<4xbf16>
// CHECK-NEXT:    %[[SUM:.*]] = affine.for %{{.*}} = 0 to 8 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (bf16) {
// CHECK-NEXT:      arith.extf %[[ACC]] : bf16 to f32
// CHECK:           %[[R:.*]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT:      affine.yield %[[R]] : bf16
// CHECK-NEXT:    }
// CHECK-NEXT:    affine.store %[[SUM]], %arg1[%[[I]]] : memref<4xbf16>

// CHECK-LABEL: func.func @k1.moving(
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 8 {
// CHECK-NOT:     iter_args

// CHECK-LABEL: func.func @k2.aliased(
// CHECK-NEXT:    affine.for %{{.*}} = 0 to 8 {
// CHECK-NEXT:      affine.load %arg1[0]
// CHECK-NEXT:      affine.load %arg1[1]
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      affine.store

module {
  // out[i] accumulates x[i, k] over k through memory: the k loop carries it instead, in
  // bf16, the buffer's type (so it is rounded at every step, as the store rounded it).
  func.func @k0.rowsum(%arg0: memref<4x8xbf16>, %arg1: memref<4xbf16>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "sum", psk_kernel.type = "bf16", psk_kernel.split = 4 : i64, psk_kernel.work = 1 : i64} {
    %zero = arith.constant 0.0 : bf16
    affine.for %i = %lo to %hi {
      affine.store %zero, %arg1[%i] : memref<4xbf16>
      affine.for %k = 0 to 8 {
        %0 = affine.load %arg1[%i] : memref<4xbf16>
        %1 = arith.extf %0 : bf16 to f32
        %2 = affine.load %arg0[%i, %k] : memref<4x8xbf16>
        %3 = arith.extf %2 : bf16 to f32
        %4 = arith.addf %1, %3 : f32
        %5 = arith.truncf %4 : f32 to bf16
        affine.store %5, %arg1[%i] : memref<4xbf16>
      }
    } {psk_kernel.parallel}
    return
  }
  // The element moves with the loop (out[k]): nothing to keep.
  func.func @k1.moving(%arg0: memref<8xf32>, %arg1: memref<8xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "add", psk_kernel.type = "f32", psk_kernel.split = 0 : i64, psk_kernel.work = 1 : i64} {
    affine.for %k = 0 to 8 {
      %0 = affine.load %arg1[%k] : memref<8xf32>
      %1 = affine.load %arg0[%k] : memref<8xf32>
      %2 = arith.addf %0, %1 : f32
      affine.store %2, %arg1[%k] : memref<8xf32>
    }
    return
  }
  // The loop also reads another element of the output: it stays in memory.
  func.func @k2.aliased(%arg0: memref<8xf32>, %arg1: memref<2xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "add", psk_kernel.type = "f32", psk_kernel.split = 0 : i64, psk_kernel.work = 1 : i64} {
    affine.for %k = 0 to 8 {
      %0 = affine.load %arg1[0] : memref<2xf32>
      %1 = affine.load %arg1[1] : memref<2xf32>
      %2 = arith.addf %0, %1 : f32
      affine.store %2, %arg1[0] : memref<2xf32>
    }
    return
  }
}
