// RUN: mlir-opt --irdl-file=%psk_kernel_irdl --split-input-file --verify-diagnostics %s
// RUN: not presk-opt --split-input-file %s 2>&1 | FileCheck %s

func.func @index_kind(%a: !psk_kernel.buffer<f32, array<i64: 4>, [""]>, %i: i64) {
  // CHECK: invalid.mlir:[[@LINE+2]]:8: error: expected 'index' but got 'i64'
  // expected-error@+1 {{expected 'index' but got 'i64'}}
  %x = "psk_kernel.load"(%a, %i) : (!psk_kernel.buffer<f32, array<i64: 4>, [""]>, i64) -> f32
  return
}

// -----

func.func @call_fn(%x: f32) {
  // CHECK: invalid.mlir:[[@LINE+2]]:8: error: 'psk_kernel.call' op attribute "fn" is expected but not provided
  // expected-error@+1 {{'psk_kernel.call' op attribute "fn" is expected but not provided}}
  %y = "psk_kernel.call"(%x) : (f32) -> f32
  return
}

// -----

func.func @store_buffer(%x: f32, %b: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  // CHECK: invalid.mlir:[[@LINE+2]]:3: error: expected base type 'psk_kernel.buffer' but got 'builtin.memref'
  // expected-error@+1 {{expected base type 'psk_kernel.buffer' but got 'builtin.memref'}}
  "psk_kernel.store"(%x, %b, %c0) : (f32, memref<4xf32>, index) -> ()
  return
}
