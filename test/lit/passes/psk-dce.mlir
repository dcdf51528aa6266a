// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-dce)' | FileCheck %s

// Unused psk ops go, including chains that become unused; used ones and returns stay.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %[[A:.*]] = "psk.exp"(%arg0) {psk.site = "chain/%0"}
// CHECK-NEXT:    return %[[A]]
func.func @chain(%x: !psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]> {
  %0 = "psk.exp"(%x) {psk.site = "chain/%0"} : (!psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  %1 = "psk.log"(%x) {psk.site = "chain/%1"} : (!psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  %2 = "psk.mul"(%1, %1) {psk.site = "chain/%2"} : (!psk.real<array<i64: 3>, [""]>, !psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  return %0 : !psk.real<array<i64: 3>, [""]>
}

// Ops of other dialects are not psk-dce's to remove.
// CHECK-LABEL: func.func @other
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    return
func.func @other() {
  %c = arith.constant 1.0 : f32
  return
}
