// IRDL's checks, as upstream mlir-opt reports them and as presk-opt does.
// RUN: mlir-opt --irdl-file=%psk_irdl --split-input-file --verify-diagnostics %s
// RUN: not presk-opt --split-input-file %s 2>&1 | FileCheck %s

func.func @arity(%x: !psk.real<array<i64: 3>, [""]>) {
  // CHECK: invalid.mlir:[[@LINE+2]]:8: error: op expects exactly 2 operands, but got 1
  // expected-error@+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "psk.add"(%x) : (!psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  return
}

// -----

func.func @kind(%x: !psk.index<array<i64: 3>, [""]>) {
  // CHECK: invalid.mlir:[[@LINE+2]]:8: error: expected base type 'psk.real' but got 'psk.index'
  // expected-error@+1 {{expected base type 'psk.real' but got 'psk.index'}}
  %0 = "psk.exp"(%x) : (!psk.index<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  return
}

// -----

func.func @attr(%x: !psk.real<array<i64: 3>, [""]>) {
  // CHECK: invalid.mlir:[[@LINE+2]]:8: error: 'psk.argmax' op attribute "axis" is expected but not provided
  // expected-error@+1 {{attribute "axis" is expected but not provided}}
  %0 = "psk.argmax"(%x) : (!psk.real<array<i64: 3>, [""]>) -> !psk.index<array<i64>, []>
  return
}

// -----

// CHECK: invalid.mlir:[[@LINE+2]]:27: error: expected base attribute 'builtin.dense_array'
// expected-error@+1 {{expected base attribute 'builtin.dense_array'}}
func.func @shape(%x: !psk.real<[3], [""]>) {
  return
}
