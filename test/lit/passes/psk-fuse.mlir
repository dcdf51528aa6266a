// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse)' | FileCheck %s
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-fuse,psk-lower-to-kernel{type=f32})' | FileCheck %s --check-prefix=KERNEL

// exp(x + b) * 0.5: the add and the exp each feed one elementwise op of the same axes, so
// they join the multiplication's group; the constant stays outside (it feeds the nest).
// CHECK:      "psk.add"(%arg0, %arg1) {psk.group = "f/%3", psk.site = "f/%0"}
// CHECK-NEXT: "psk.exp"(%{{.*}}) {psk.group = "f/%3", psk.site = "f/%1"}
// CHECK-NEXT: "psk.const"() {psk.site = "f/%2", value = "0.5"}
// CHECK-NEXT: "psk.mul"(%{{.*}}, %{{.*}}) {psk.site = "f/%3"}

// One launch of one kernel computes the group, the constant inlined into its nest.
// KERNEL:      "psk_kernel.launch"(%{{.*}}) {kernel = @k0.mul, psk.site = "f/%3"}
// KERNEL-NOT:  "psk_kernel.launch"
// KERNEL:      func.func @k0.mul({{.*}}) attributes {psk_kernel.kernel = "mul", psk_kernel.ops = 3 : i64, psk_kernel.type = "f32"}
// KERNEL:        "psk_kernel.load"
// KERNEL:        "psk_kernel.load"
// KERNEL-NEXT:   arith.addf
// KERNEL-NEXT:   "psk_kernel.call"(%{{.*}}) {fn = "exp"}
// KERNEL-NEXT:   arith.mulf
// KERNEL-NEXT:   "psk_kernel.store"
module attributes {psk.dims = {N = 2 : i64}, psk.entry = @f, psk.params = [], psk.program = "elementwise.psk"} {
  func.func @f(%arg0: !psk.real<array<i64: 2, 3>, ["N", ""]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 3>, [""]> {psk.name = "b"}) -> !psk.real<array<i64: 2, 3>, ["N", ""]> attributes {psk.function = "f"} {
    %0 = "psk.add"(%arg0, %arg1) {psk.site = "f/%0"} : (!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 2, 3>, ["N", ""]>
    %1 = "psk.exp"(%0) {psk.site = "f/%1"} : (!psk.real<array<i64: 2, 3>, ["N", ""]>) -> !psk.real<array<i64: 2, 3>, ["N", ""]>
    %2 = "psk.const"() {psk.site = "f/%2", value = "0.5"} : () -> !psk.real<array<i64>, []>
    %3 = "psk.mul"(%1, %2) {psk.site = "f/%3"} : (!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64>, []>) -> !psk.real<array<i64: 2, 3>, ["N", ""]>
    return %3 : !psk.real<array<i64: 2, 3>, ["N", ""]>
  }
}
