// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-kernel-to-affine)' | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-kernel-to-affine,psk-kernel-to-affine)' | FileCheck %s

// Buffers become memrefs and two index arguments bound the outermost loop, which is the
// kernel's only work and parallel: the host may split it (psk_kernel.split = 4 trips).
// bf16 elements widen with extf after the load and round with truncf before the store.
// CHECK-LABEL: func.func @k0.add(%arg0: memref<4x2xbf16>, %arg1: memref<2xbf16>, %arg2: memref<4x2xbf16>, %arg3: index, %arg4: index)
// CHECK-SAME:    psk_kernel.split = 4 : i64, psk_kernel.type = "bf16", psk_kernel.work = 32 : i64
// CHECK-NEXT:    affine.for %arg5 = %arg3 to %arg4 {
// CHECK-NEXT:      affine.for %arg6 = 0 to 2 {
// CHECK-NEXT:        %[[A:.*]] = affine.load %arg0[%arg5, %arg6] : memref<4x2xbf16>
// CHECK-NEXT:        %[[AW:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT:        %[[B:.*]] = affine.load %arg1[%arg6] : memref<2xbf16>
// CHECK-NEXT:        %[[BW:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[AW]], %[[BW]] : f32
// CHECK-NEXT:        %[[R:.*]] = arith.truncf %[[S]] : f32 to bf16
// CHECK-NEXT:        affine.store %[[R]], %arg2[%arg5, %arg6] : memref<4x2xbf16>
// CHECK-NEXT:      } {psk_kernel.parallel}
// CHECK-NEXT:    } {psk_kernel.parallel}

// An index computed from loop indices folds into the affine map; a row chosen by a token
// is a memref.load; psk_kernel.call of exp is math.exp.
// CHECK-LABEL: func.func @k1.embed_exp(
// CHECK-SAME:    psk_kernel.split = 3 : i64, psk_kernel.type = "f32", psk_kernel.work = 36 : i64
// CHECK:         %[[TOK:.*]] = affine.load %arg1[%arg5] : memref<3xi64>
// CHECK-NEXT:    %[[ROW:.*]] = arith.index_cast %[[TOK]] : i64 to index
// CHECK:         %[[X:.*]] = memref.load %arg0[%[[ROW]], %{{.*}}] : memref<5x4xf32>
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[X]] : f32
// CHECK-NEXT:    affine.store %[[E]], %arg2[%arg5, %arg6 * 2 + 1] : memref<3x4xf32>

// A sum with a scalar result cannot be split (split = 0): its loop keeps constant bounds
// and carries the running value.
// CHECK-LABEL: func.func @k2.sum(%arg0: memref<3xf64>, %arg1: memref<f64>, %arg2: index, %arg3: index)
// CHECK-SAME:    psk_kernel.split = 0 : i64
// CHECK:         %[[SUM:.*]] = affine.for %arg4 = 0 to 3 iter_args(%{{.*}} = %cst) -> (f64) {
// CHECK:         affine.store %[[SUM]], %arg1[] : memref<f64>
// CHECK-NOT:     psk_kernel.load

// A row's maximum keeps its mark, psk_kernel.any_order, for psk-vectorize.
// CHECK-LABEL: func.func @k3.softmax_max(
// CHECK:         affine.for %arg4 = 0 to 3 iter_args(%{{.*}} = %cst) -> (f64) {
// CHECK:         } {psk_kernel.any_order}

module {
  func.func @k0.add(%arg0: !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, %arg1: !psk_kernel.buffer<bf16, array<i64: 2>, [""]>, %arg2: !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>) attributes {psk_kernel.kernel = "add", psk_kernel.ops = 1 : i64, psk_kernel.type = "bf16"} {
    %c2 = arith.constant 2 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    scf.for %i = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        %0 = "psk_kernel.load"(%arg0, %i, %j) : (!psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, index, index) -> f32
        %1 = "psk_kernel.load"(%arg1, %j) : (!psk_kernel.buffer<bf16, array<i64: 2>, [""]>, index) -> f32
        %2 = arith.addf %0, %1 : f32
        "psk_kernel.store"(%2, %arg2, %i, %j) : (f32, !psk_kernel.buffer<bf16, array<i64: 4, 2>, ["batch", ""]>, index, index) -> ()
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  func.func @k1.embed_exp(%arg0: !psk_kernel.buffer<f32, array<i64: 5, 4>, ["", ""]>, %arg1: !psk_kernel.buffer<i64, array<i64: 3>, ["T"]>, %arg2: !psk_kernel.buffer<f32, array<i64: 3, 4>, ["T", ""]>) attributes {psk_kernel.kernel = "embed", psk_kernel.ops = 2 : i64, psk_kernel.type = "f32"} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    scf.for %t = %c0 to %c3 step %c1 {
      %tok = "psk_kernel.load"(%arg1, %t) : (!psk_kernel.buffer<i64, array<i64: 3>, ["T"]>, index) -> i64
      %row = arith.index_cast %tok : i64 to index
      scf.for %jb = %c0 to %c2 step %c1 {
        %j0 = arith.muli %jb, %c2 : index
        %j = arith.addi %j0, %c1 : index
        %x = "psk_kernel.load"(%arg0, %row, %j) : (!psk_kernel.buffer<f32, array<i64: 5, 4>, ["", ""]>, index, index) -> f32
        %e = "psk_kernel.call"(%x) {fn = "exp"} : (f32) -> f32
        "psk_kernel.store"(%e, %arg2, %t, %j) : (f32, !psk_kernel.buffer<f32, array<i64: 3, 4>, ["T", ""]>, index, index) -> ()
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  func.func @k2.sum(%arg0: !psk_kernel.buffer<f64, array<i64: 3>, [""]>, %arg1: !psk_kernel.buffer<f64, array<i64>, []>) attributes {psk_kernel.kernel = "sum", psk_kernel.ops = 1 : i64, psk_kernel.type = "f64"} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %zero = arith.constant 0.0 : f64
    %s = scf.for %k = %c0 to %c3 step %c1 iter_args(%acc = %zero) -> (f64) {
      %x = "psk_kernel.load"(%arg0, %k) : (!psk_kernel.buffer<f64, array<i64: 3>, [""]>, index) -> f64
      %n = arith.addf %acc, %x : f64
      scf.yield %n : f64
    }
    "psk_kernel.store"(%s, %arg1) : (f64, !psk_kernel.buffer<f64, array<i64>, []>) -> ()
    return
  }
  func.func @k3.softmax_max(%arg0: !psk_kernel.buffer<f64, array<i64: 3>, [""]>, %arg1: !psk_kernel.buffer<f64, array<i64>, []>) attributes {psk_kernel.kernel = "softmax", psk_kernel.ops = 1 : i64, psk_kernel.type = "f64"} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %inf = arith.constant 0xFFF0000000000000 : f64
    %m = scf.for %k = %c0 to %c3 step %c1 iter_args(%acc = %inf) -> (f64) {
      %x = "psk_kernel.load"(%arg0, %k) : (!psk_kernel.buffer<f64, array<i64: 3>, [""]>, index) -> f64
      %gt = arith.cmpf ogt, %x, %acc : f64
      %n = arith.select %gt, %x, %acc : f64
      scf.yield %n : f64
    } {psk_kernel.any_order}
    "psk_kernel.store"(%m, %arg1) : (f64, !psk_kernel.buffer<f64, array<i64>, []>) -> ()
    return
  }
}
