// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-keep-libm-calls)' | FileCheck %s

// The C library's pow, declared, becomes nobuiltin: LLVM will neither rewrite pow(x, 2)
// as x·x nor fold it. The kernel, a definition, is left as it is.
// CHECK:     llvm.func @pow(f64, f64) -> f64 attributes {passthrough = ["nobuiltin"]}
// CHECK:     llvm.func @kernel(%arg0: f64) -> f64 {
// CHECK-NOT: passthrough
module {
  llvm.func @pow(f64, f64) -> f64
  llvm.func @kernel(%arg0: f64) -> f64 {
    %0 = llvm.mlir.constant(2.000000e+00 : f64) : f64
    %1 = llvm.call @pow(%arg0, %0) : (f64, f64) -> f64
    llvm.return %1 : f64
  }
}
