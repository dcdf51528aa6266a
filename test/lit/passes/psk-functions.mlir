// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-functions{impl=presk})' | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-functions{impl=presk},psk-functions{impl=libm})' | FileCheck %s --check-prefix=LIBM
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-functions{impl=glibc})' 2>&1 | FileCheck %s --check-prefix=BAD

// Every exp, erf and tanh of an f32 kernel becomes presk's own, one inside a sum (a loop
// carrying a value) too; log, and every call of an f64 kernel, stay the C library's.

// CHECK-LABEL: func.func @k0.gelu(
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "exp", psk_kernel.impl = "presk"}
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "erf", psk_kernel.impl = "presk"}
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "tanh", psk_kernel.impl = "presk"}
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "log"} :
// CHECK-LABEL: func.func @k1.sumexp(
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "exp", psk_kernel.impl = "presk"}
// CHECK-LABEL: func.func @k2.exp(
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "exp"} :
// CHECK:         "psk_kernel.call"(%{{.*}}) {fn = "tanh"} :
// LIBM-NOT:    psk_kernel.impl
// BAD: psk-functions: impl=glibc is libm or presk

module attributes {psk_kernel.type = "f32"} {
  func.func @k0.gelu(%arg0: !psk_kernel.buffer<f32, array<i64: 8>, ["N"]>, %arg1: !psk_kernel.buffer<f32, array<i64: 8>, ["N"]>) attributes {psk_kernel.kernel = "gelu", psk_kernel.ops = 4 : i64, psk_kernel.type = "f32"} {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    scf.for %arg2 = %c0 to %c8 step %c1 {
      %0 = "psk_kernel.load"(%arg0, %arg2) : (!psk_kernel.buffer<f32, array<i64: 8>, ["N"]>, index) -> f32
      %1 = "psk_kernel.call"(%0) {fn = "exp"} : (f32) -> f32
      %2 = "psk_kernel.call"(%1) {fn = "erf"} : (f32) -> f32
      %3 = "psk_kernel.call"(%2) {fn = "tanh"} : (f32) -> f32
      %4 = "psk_kernel.call"(%3) {fn = "log"} : (f32) -> f32
      "psk_kernel.store"(%4, %arg1, %arg2) : (f32, !psk_kernel.buffer<f32, array<i64: 8>, ["N"]>, index) -> ()
    } {psk_kernel.parallel}
    return
  }
  func.func @k1.sumexp(%arg0: !psk_kernel.buffer<f32, array<i64: 8>, ["N"]>, %arg1: !psk_kernel.buffer<f32, array<i64>, []>) attributes {psk_kernel.kernel = "sum", psk_kernel.ops = 2 : i64, psk_kernel.type = "f32"} {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    %0 = scf.for %arg2 = %c0 to %c8 step %c1 iter_args(%arg3 = %cst) -> (f32) {
      %1 = "psk_kernel.load"(%arg0, %arg2) : (!psk_kernel.buffer<f32, array<i64: 8>, ["N"]>, index) -> f32
      %2 = "psk_kernel.call"(%1) {fn = "exp"} : (f32) -> f32
      %3 = arith.addf %arg3, %2 : f32
      scf.yield %3 : f32
    }
    "psk_kernel.store"(%0, %arg1) : (f32, !psk_kernel.buffer<f32, array<i64>, []>) -> ()
    return
  }
  func.func @k2.exp(%arg0: !psk_kernel.buffer<f64, array<i64: 8>, ["N"]>, %arg1: !psk_kernel.buffer<f64, array<i64: 8>, ["N"]>) attributes {psk_kernel.kernel = "exp", psk_kernel.ops = 2 : i64, psk_kernel.type = "f64"} {
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    scf.for %arg2 = %c0 to %c8 step %c1 {
      %0 = "psk_kernel.load"(%arg0, %arg2) : (!psk_kernel.buffer<f64, array<i64: 8>, ["N"]>, index) -> f64
      %1 = "psk_kernel.call"(%0) {fn = "exp"} : (f64) -> f64
      %2 = "psk_kernel.call"(%1) {fn = "tanh"} : (f64) -> f64
      "psk_kernel.store"(%2, %arg1, %arg2) : (f64, !psk_kernel.buffer<f64, array<i64: 8>, ["N"]>, index) -> ()
    } {psk_kernel.parallel}
    return
  }
}
