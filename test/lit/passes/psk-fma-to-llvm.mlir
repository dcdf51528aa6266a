// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fma-to-llvm)' | FileCheck %s

// A fused multiply-add, scalar or in vector lanes, becomes LLVM's fma intrinsic, which
// convert-math-to-libm (run after it) leaves alone: no call of the C library's fma, and
// no call a lane. Every other math op is left as it is.
// CHECK-LABEL: func.func @kernel(
// CHECK:         llvm.intr.fma(%arg0, %arg1, %arg2) : (f32, f32, f32) -> f32
// CHECK:         llvm.intr.fma(%arg3, %arg3, %arg3) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK:         math.exp
// CHECK-NOT:     math.fma
module {
  func.func @kernel(%a: f32, %b: f32, %c: f32, %v: vector<8xf32>) -> (f32, vector<8xf32>, f32) {
    %0 = math.fma %a, %b, %c : f32
    %1 = math.fma %v, %v, %v : vector<8xf32>
    %2 = math.exp %0 : f32
    return %0, %1, %2 : f32, vector<8xf32>, f32
  }
}
