// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-entry-wrapper)' | FileCheck %s
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-entry-wrapper{kernel=k9.none})' 2>&1 | FileCheck %s --check-prefix=BAD

// main fills the input with ((n mod 7) + 1) / 4 (rounded to bf16), launches the kernel over
// its whole split loop (0 to 4) and prints each output element widened to f32.
// CHECK-LABEL: func.func @main() attributes {psk_kernel.entry}
// CHECK:         %[[IN:.*]] = memref.alloc() : memref<4xbf16>
// CHECK:           arith.remsi
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:           affine.store %{{.*}}, %[[IN]]
// CHECK:         %[[OUT:.*]] = memref.alloc() : memref<4xbf16>
// CHECK:         %[[HI:.*]] = arith.constant 4 : index
// CHECK:         call @k0.neg(%[[IN]], %[[OUT]], %{{.*}}, %[[HI]])
// CHECK:           %[[X:.*]] = affine.load %[[OUT]]
// CHECK-NEXT:      %[[P:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT:      vector.print %[[P]] : f32
// CHECK-LABEL: func.func @k0.neg(

// BAD: psk-entry-wrapper: no kernel k9.none (kernels: k0.neg)
module {
  func.func @k0.neg(%arg0: memref<4xbf16>, %arg1: memref<4xbf16>, %arg2: index, %arg3: index) attributes {psk_kernel.kernel = "neg", psk_kernel.split = 4 : i64, psk_kernel.type = "bf16", psk_kernel.work = 16 : i64} {
    affine.for %i = %arg2 to %arg3 {
      %0 = affine.load %arg0[%i] : memref<4xbf16>
      %1 = arith.extf %0 : bf16 to f32
      %2 = arith.negf %1 : f32
      %3 = arith.truncf %2 : f32 to bf16
      affine.store %3, %arg1[%i] : memref<4xbf16>
    } {psk_kernel.parallel}
    return
  }
}
