// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-vectorize{bytes=32})' | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-vectorize{bytes=4})' | FileCheck %s --check-prefix=NARROW

// CHECK: #[[END:.*]] = affine_map<()[s0, s1] -> (s0 + ((s1 - s0) floordiv 4) * 4)>

// CHECK-LABEL: func.func @k0.axpy(
// CHECK:         %[[A:.*]] = affine.load %arg1[] : memref<f32>
// CHECK-NEXT:    %[[AV:.*]] = vector.broadcast %[[A]] : f32 to vector<8xf32>
// CHECK-NEXT:    affine.for %[[J:.*]] = 0 to 16 step 8 {
// CHECK-NEXT:      %[[X:.*]] = affine.vector_load %arg0[%{{.*}}, %[[J]]] : memref<2x20xf32>, vector<8xf32>
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[X]] : vector<8xf32>
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[AV]], %[[E]] : vector<8xf32>
// CHECK-NEXT:      %[[C:.*]] = arith.cmpf oge, %[[M]], %[[X]] : vector<8xf32>
// CHECK-NEXT:      %[[S:.*]] = arith.select %[[C]], %[[M]], %[[X]] : vector<8xi1>, vector<8xf32>
// CHECK-NEXT:      affine.vector_store %[[S]], %arg2[%{{.*}}, %[[J]]] : memref<2x20xf32>, vector<8xf32>
// CHECK-NEXT:    } {psk_kernel.parallel}
// CHECK-NEXT:    affine.for %{{.*}} = 16 to 20 {
// CHECK-NEXT:      affine.load %arg0
// CHECK-NEXT:      math.exp %{{.*}} : f32
// CHECK-NEXT:      arith.mulf %[[A]], %{{.*}} : f32

// CHECK-LABEL: func.func @k1.neg(
// CHECK-NEXT:    affine.for %[[J:.*]] = %arg2 to #[[END]]()[%arg2, %arg3] step 4 {
// CHECK-NEXT:      affine.vector_load %arg0[%[[J]]] : memref<8xf64>, vector<4xf64>
// CHECK-NEXT:      arith.negf %{{.*}} : vector<4xf64>
// CHECK-NEXT:      affine.vector_store
// CHECK-NEXT:    } {psk_kernel.parallel}
// CHECK-NEXT:    affine.for %{{.*}} = #[[END]]()[%arg2, %arg3] to %arg3 {
// CHECK-NEXT:      affine.load %arg0
// CHECK-NEXT:      arith.negf %{{.*}} : f64

// CHECK-LABEL: func.func @k2.embed(
// CHECK:         %[[ROW:.*]] = arith.index_cast
// CHECK-NEXT:    affine.for %[[J:.*]] = 0 to 16 step 8 {
// CHECK-NEXT:      %[[X:.*]] = vector.load %arg0[%[[ROW]], %[[J]]] : memref<5x16xbf16>, vector<8xbf16>
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[X]] : vector<8xbf16> to vector<8xf32>
// CHECK-NEXT:      %[[R:.*]] = arith.truncf %[[W]] : vector<8xf32> to vector<8xbf16>
// CHECK-NEXT:      affine.vector_store %[[R]], %arg2
// CHECK-NEXT:    } {psk_kernel.parallel}
// CHECK-NEXT:  } {psk_kernel.parallel}

// CHECK-LABEL: func.func @k3.kept(
// CHECK-NOT:     vector

// CHECK-LABEL: func.func @k4.deep(
// CHECK:         affine.for %{{.*}} = 0 to 64 step 32 {
// CHECK-NEXT:      affine.vector_load %arg0[%{{.*}}] : memref<64xf32>, vector<32xf32>
// CHECK-NOT:     affine.for
// CHECK-LABEL: func.func @k5.deep(
// CHECK:         affine.for %{{.*}} = 0 to 48 step 16 {
// CHECK-NEXT:      affine.vector_load %arg0[%{{.*}}] : memref<48xf32>, vector<16xf32>
// CHECK-NOT:     affine.for
// CHECK-LABEL: func.func @k6.rows(
// CHECK:         affine.for %{{.*}} = 0 to 64 step 16 {
// CHECK-NEXT:      affine.vector_load %arg0[0, %{{.*}}] : memref<2x64xf32>, vector<16xf32>
// CHECK-NOT:     affine.for
// CHECK:         return

// CHECK-LABEL: func.func @k7.softmax(
// CHECK:         %[[START:.*]] = vector.broadcast %[[INF:.*]] : f32 to vector<8xf32>
// CHECK:         %[[ZERO:.*]] = vector.broadcast %{{.*}} : i8 to vector<8xi8>
// CHECK-NEXT:    %[[LANES:.*]] = affine.for %[[J:.*]] = 0 to 16 step 8 iter_args(%[[M:.*]] = %[[START]]) -> (vector<8xf32>) {
// CHECK-NEXT:      %[[X:.*]] = affine.vector_load %arg0[%{{.*}}, %[[J]]] : memref<2x20xf32>, vector<8xf32>
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[X]], %[[M]] : vector<8xf32>
// CHECK-NEXT:      %[[K:.*]] = affine.vector_load %arg1[%{{.*}}, %[[J]]] : memref<2x20xi8>, vector<8xi8>
// CHECK-NEXT:      %[[KEEP:.*]] = arith.cmpi ne, %[[K]], %[[ZERO]] : vector<8xi8>
// CHECK-NEXT:      %[[TAKE:.*]] = arith.andi %[[KEEP]], %[[GT]] : vector<8xi1>
// CHECK-NEXT:      %[[NEW:.*]] = arith.select %[[TAKE]], %[[X]], %[[M]] : vector<8xi1>, vector<8xf32>
// CHECK-NEXT:      affine.yield %[[NEW]] : vector<8xf32>
// CHECK-NEXT:    } {psk_kernel.any_order}
// CHECK-NEXT:    %[[LO4:.*]] = vector.extract_strided_slice %[[LANES]] {offsets = [0], sizes = [4], strides = [1]} : vector<8xf32> to vector<4xf32>
// CHECK-NEXT:    %[[HI4:.*]] = vector.extract_strided_slice %[[LANES]] {offsets = [4], sizes = [4], strides = [1]} : vector<8xf32> to vector<4xf32>
// CHECK-NEXT:    %[[GT4:.*]] = arith.cmpf ogt, %[[HI4]], %[[LO4]] : vector<4xf32>
// CHECK-NEXT:    %[[M4:.*]] = arith.select %[[GT4]], %[[HI4]], %[[LO4]] : vector<4xi1>, vector<4xf32>
// CHECK:         %[[M1:.*]] = arith.select %{{.*}} : vector<1xi1>, vector<1xf32>
// CHECK-NEXT:    %[[MAX:.*]] = vector.extract %[[M1]][0] : f32 from vector<1xf32>
// CHECK-NEXT:    %[[REST:.*]] = affine.for %{{.*}} = 16 to 20 iter_args(%{{.*}} = %[[MAX]]) -> (f32) {
// CHECK:           arith.select %{{.*}} : f32
// CHECK:         } {psk_kernel.any_order}
// CHECK-NEXT:    affine.store %[[REST]], %arg2

// CHECK-LABEL: func.func @k8.max(
// CHECK-NOT:     vector
// CHECK:         return
// CHECK-LABEL: func.func @k9.sum(
// CHECK-NOT:     vector
// CHECK:         return

// Registers one f32 wide have no lanes to fill.
// NARROW-NOT: vector

module {
  // 20 contiguous f32 elements a row: two vectors of 8 lanes (32-byte registers), then
  // four iterations in the scalar loop. The scale, the same for every lane, is broadcast.
  func.func @k0.axpy(%arg0: memref<2x20xf32>, %arg1: memref<f32>, %arg2: memref<2x20xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "mul", psk_kernel.type = "f32", psk_kernel.split = 2 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 20 {
        %a = affine.load %arg1[] : memref<f32>
        %x = affine.load %arg0[%i, %j] : memref<2x20xf32>
        %e = math.exp %x : f32
        %m = arith.mulf %a, %e : f32
        %c = arith.cmpf oge, %m, %x : f32
        %s = arith.select %c, %m, %x : f32
        affine.store %s, %arg2[%i, %j] : memref<2x20xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  // f64 has four lanes. The loop the host splits is bounded by lo and hi: whole vectors
  // from lo, then the scalar rest up to hi.
  func.func @k1.neg(%arg0: memref<8xf64>, %arg1: memref<8xf64>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "neg", psk_kernel.type = "f64", psk_kernel.split = 8 : i64, psk_kernel.work = 1 : i64} {
    affine.for %j = %lo to %hi {
      %x = affine.load %arg0[%j] : memref<8xf64>
      %n = arith.negf %x : f64
      affine.store %n, %arg1[%j] : memref<8xf64>
    } {psk_kernel.parallel}
    return
  }
  // bf16 rows gathered by a token: widened and rounded in 8 lanes of f32. 16 elements
  // are two whole vectors: no scalar loop.
  func.func @k2.embed(%arg0: memref<5x16xbf16>, %arg1: memref<3xi64>, %arg2: memref<3x16xbf16>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "embed", psk_kernel.type = "bf16", psk_kernel.split = 3 : i64, psk_kernel.work = 1 : i64} {
    affine.for %t = %lo to %hi {
      %tok = affine.load %arg1[%t] : memref<3xi64>
      %row = arith.index_cast %tok : i64 to index
      affine.for %j = 0 to 16 {
        %x = memref.load %arg0[%row, %j] : memref<5x16xbf16>
        %w = arith.extf %x : bf16 to f32
        %r = arith.truncf %w : f32 to bf16
        affine.store %r, %arg2[%t, %j] : memref<3x16xbf16>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  // Not contiguous (a transposed read), a sequential loop, and a loop shorter than a
  // vector: left as they are.
  func.func @k3.kept(%arg0: memref<16x16xf32>, %arg1: memref<16x16xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "transpose", psk_kernel.type = "f32", psk_kernel.split = 16 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 16 {
        %x = affine.load %arg0[%j, %i] : memref<16x16xf32>
        affine.store %x, %arg1[%i, %j] : memref<16x16xf32>
      } {psk_kernel.parallel}
      affine.for %j = 0 to 16 {
        %x = affine.load %arg0[%i, %j] : memref<16x16xf32>
        affine.store %x, %arg1[%i, %j] : memref<16x16xf32>
      }
      affine.for %j = 0 to 4 {
        %x = affine.load %arg0[%i, %j] : memref<16x16xf32>
        affine.store %x, %arg1[%i, %j] : memref<16x16xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  // A chain of 25 dependent operations (a load, 23 products, a store): four vectors an
  // iteration where they divide the extent (64 = 2 · 32), else two (48 = 3 · 16), so the
  // core has independent chains to interleave.
  func.func @k4.deep(%arg0: memref<64xf32>, %arg1: memref<64xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "pow", psk_kernel.type = "f32", psk_kernel.split = 1 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 64 {
        %x = affine.load %arg0[%j] : memref<64xf32>
        %m0 = arith.mulf %x, %x : f32
        %m1 = arith.mulf %m0, %x : f32
        %m2 = arith.mulf %m1, %x : f32
        %m3 = arith.mulf %m2, %x : f32
        %m4 = arith.mulf %m3, %x : f32
        %m5 = arith.mulf %m4, %x : f32
        %m6 = arith.mulf %m5, %x : f32
        %m7 = arith.mulf %m6, %x : f32
        %m8 = arith.mulf %m7, %x : f32
        %m9 = arith.mulf %m8, %x : f32
        %m10 = arith.mulf %m9, %x : f32
        %m11 = arith.mulf %m10, %x : f32
        %m12 = arith.mulf %m11, %x : f32
        %m13 = arith.mulf %m12, %x : f32
        %m14 = arith.mulf %m13, %x : f32
        %m15 = arith.mulf %m14, %x : f32
        %m16 = arith.mulf %m15, %x : f32
        %m17 = arith.mulf %m16, %x : f32
        %m18 = arith.mulf %m17, %x : f32
        %m19 = arith.mulf %m18, %x : f32
        %m20 = arith.mulf %m19, %x : f32
        %m21 = arith.mulf %m20, %x : f32
        %m22 = arith.mulf %m21, %x : f32
        affine.store %m22, %arg1[%j] : memref<64xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  func.func @k5.deep(%arg0: memref<48xf32>, %arg1: memref<48xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "pow", psk_kernel.type = "f32", psk_kernel.split = 1 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 48 {
        %x = affine.load %arg0[%j] : memref<48xf32>
        %m0 = arith.mulf %x, %x : f32
        %m1 = arith.mulf %m0, %x : f32
        %m2 = arith.mulf %m1, %x : f32
        %m3 = arith.mulf %m2, %x : f32
        %m4 = arith.mulf %m3, %x : f32
        %m5 = arith.mulf %m4, %x : f32
        %m6 = arith.mulf %m5, %x : f32
        %m7 = arith.mulf %m6, %x : f32
        %m8 = arith.mulf %m7, %x : f32
        %m9 = arith.mulf %m8, %x : f32
        %m10 = arith.mulf %m9, %x : f32
        %m11 = arith.mulf %m10, %x : f32
        %m12 = arith.mulf %m11, %x : f32
        %m13 = arith.mulf %m12, %x : f32
        %m14 = arith.mulf %m13, %x : f32
        %m15 = arith.mulf %m14, %x : f32
        %m16 = arith.mulf %m15, %x : f32
        %m17 = arith.mulf %m16, %x : f32
        %m18 = arith.mulf %m17, %x : f32
        %m19 = arith.mulf %m18, %x : f32
        %m20 = arith.mulf %m19, %x : f32
        %m21 = arith.mulf %m20, %x : f32
        %m22 = arith.mulf %m21, %x : f32
        affine.store %m22, %arg1[%j] : memref<48xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  // Two such chains side by side, one a row: twice the lanes make up the four.
  func.func @k6.rows(%arg0: memref<2x64xf32>, %arg1: memref<2x64xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "pow", psk_kernel.type = "f32", psk_kernel.split = 1 : i64, psk_kernel.work = 1 : i64} {
    affine.for %i = %lo to %hi {
      affine.for %j = 0 to 64 {
        %a = affine.load %arg0[0, %j] : memref<2x64xf32>
        %b = affine.load %arg0[1, %j] : memref<2x64xf32>
        %a0 = arith.mulf %a, %a : f32
        %a1 = arith.mulf %a0, %a : f32
        %a2 = arith.mulf %a1, %a : f32
        %a3 = arith.mulf %a2, %a : f32
        %a4 = arith.mulf %a3, %a : f32
        %a5 = arith.mulf %a4, %a : f32
        %a6 = arith.mulf %a5, %a : f32
        %a7 = arith.mulf %a6, %a : f32
        %a8 = arith.mulf %a7, %a : f32
        %a9 = arith.mulf %a8, %a : f32
        %a10 = arith.mulf %a9, %a : f32
        %a11 = arith.mulf %a10, %a : f32
        %a12 = arith.mulf %a11, %a : f32
        %a13 = arith.mulf %a12, %a : f32
        %a14 = arith.mulf %a13, %a : f32
        %a15 = arith.mulf %a14, %a : f32
        %a16 = arith.mulf %a15, %a : f32
        %a17 = arith.mulf %a16, %a : f32
        %a18 = arith.mulf %a17, %a : f32
        %a19 = arith.mulf %a18, %a : f32
        %a20 = arith.mulf %a19, %a : f32
        %a21 = arith.mulf %a20, %a : f32
        %a22 = arith.mulf %a21, %a : f32
        %b0 = arith.mulf %b, %b : f32
        %b1 = arith.mulf %b0, %b : f32
        %b2 = arith.mulf %b1, %b : f32
        %b3 = arith.mulf %b2, %b : f32
        %b4 = arith.mulf %b3, %b : f32
        %b5 = arith.mulf %b4, %b : f32
        %b6 = arith.mulf %b5, %b : f32
        %b7 = arith.mulf %b6, %b : f32
        %b8 = arith.mulf %b7, %b : f32
        %b9 = arith.mulf %b8, %b : f32
        %b10 = arith.mulf %b9, %b : f32
        %b11 = arith.mulf %b10, %b : f32
        %b12 = arith.mulf %b11, %b : f32
        %b13 = arith.mulf %b12, %b : f32
        %b14 = arith.mulf %b13, %b : f32
        %b15 = arith.mulf %b14, %b : f32
        %b16 = arith.mulf %b15, %b : f32
        %b17 = arith.mulf %b16, %b : f32
        %b18 = arith.mulf %b17, %b : f32
        %b19 = arith.mulf %b18, %b : f32
        %b20 = arith.mulf %b19, %b : f32
        %b21 = arith.mulf %b20, %b : f32
        %b22 = arith.mulf %b21, %b : f32
        affine.store %a22, %arg1[0, %j] : memref<2x64xf32>
        affine.store %b22, %arg1[1, %j] : memref<2x64xf32>
      } {psk_kernel.parallel}
    } {psk_kernel.parallel}
    return
  }
  // A row's maximum over the positions a mask allows, marked any_order (softmax's,
  // presk/kernel/rows.py): a vector of maxima from -inf, every lane its own iterations,
  // its upper half against its lower down to one lane, then the scalar rest from there.
  func.func @k7.softmax(%arg0: memref<2x20xf32>, %arg1: memref<2x20xi8>, %arg2: memref<2xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "softmax", psk_kernel.type = "f32", psk_kernel.split = 2 : i64, psk_kernel.work = 1 : i64} {
    %inf = arith.constant 0xFF800000 : f32
    %c0_i8 = arith.constant 0 : i8
    affine.for %i = %lo to %hi {
      %m = affine.for %j = 0 to 20 iter_args(%acc = %inf) -> (f32) {
        %x = affine.load %arg0[%i, %j] : memref<2x20xf32>
        %gt = arith.cmpf ogt, %x, %acc : f32
        %k = affine.load %arg1[%i, %j] : memref<2x20xi8>
        %keep = arith.cmpi ne, %k, %c0_i8 : i8
        %take = arith.andi %keep, %gt : i1
        %new = arith.select %take, %x, %acc : f32
        affine.yield %new : f32
      } {psk_kernel.any_order}
      affine.store %m, %arg2[%i] : memref<2xf32>
    } {psk_kernel.parallel}
    return
  }
  // The same maximum unmarked (max's own, which it stores: the sign of a zero maximum
  // depends on the order), and a marked loop that carries a sum: left as they are.
  func.func @k8.max(%arg0: memref<2x20xf32>, %arg1: memref<2xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "reduce_max", psk_kernel.type = "f32", psk_kernel.split = 2 : i64, psk_kernel.work = 1 : i64} {
    %inf = arith.constant 0xFF800000 : f32
    affine.for %i = %lo to %hi {
      %m = affine.for %j = 0 to 20 iter_args(%acc = %inf) -> (f32) {
        %x = affine.load %arg0[%i, %j] : memref<2x20xf32>
        %gt = arith.cmpf ogt, %x, %acc : f32
        %new = arith.select %gt, %x, %acc : f32
        affine.yield %new : f32
      }
      affine.store %m, %arg1[%i] : memref<2xf32>
    } {psk_kernel.parallel}
    return
  }
  func.func @k9.sum(%arg0: memref<2x20xf32>, %arg1: memref<2xf32>, %lo: index, %hi: index) attributes {psk_kernel.kernel = "sum", psk_kernel.type = "f32", psk_kernel.split = 2 : i64, psk_kernel.work = 1 : i64} {
    %zero = arith.constant 0.0 : f32
    affine.for %i = %lo to %hi {
      %s = affine.for %j = 0 to 20 iter_args(%acc = %zero) -> (f32) {
        %x = affine.load %arg0[%i, %j] : memref<2x20xf32>
        %new = arith.addf %acc, %x : f32
        affine.yield %new : f32
      } {psk_kernel.any_order}
      affine.store %s, %arg1[%i] : memref<2xf32>
    } {psk_kernel.parallel}
    return
  }
}
