// RUN: presk-opt %s --split-input-file --pass-pipeline='builtin.module(psk-vjp,psk-verify)' | FileCheck %s
// RUN: presk-opt %s --split-input-file --pass-pipeline='builtin.module(psk-vjp{remat=recompute},psk-verify)' | FileCheck %s --check-prefix=RECOMPUTE

// The vjp of a dot: psk.vjp becomes a call of lin.vjp, which runs lin.fwd (the forward
// replayed, its site kept) and lin.bwd (dot_vjp_l for x, dot_vjp_r for w).
// CHECK-LABEL: func.func @lin_vjp
// CHECK:         %[[R:.*]] = call @lin.vjp(%{{.*}}, %arg2) {psk.callsite = "lin_vjp/%c0"}
// CHECK-NEXT:    return %[[R]]
// CHECK-LABEL: func.func @lin.fwd
// CHECK:         "psk.dot"(%arg0, %arg1) {psk.site = "lin/%0"}
// The complete cotangent of each forward site is marked where it arises: here lin/%0's
// is the backward's argument ct.
// CHECK-LABEL: func.func @lin.bwd(%arg0: {{.*}} {psk.name = "res"}, %arg1: {{.*}} {psk.cotangent_of = ["lin/%0"], psk.name = "ct"})
// CHECK-DAG:     "psk.dot_vjp_l"(%arg1, %{{.*}}) {psk.site = "lin.bwd/%{{[0-9]+}}"} : (!psk.real<array<i64: 2, 2>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> !psk.real<array<i64: 2, 3>, ["N", ""]>
// CHECK-DAG:     "psk.dot_vjp_r"(%{{.*}}, %arg1) {psk.site = "lin.bwd/%{{[0-9]+}}"} : (!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 2, 2>, ["N", ""]>) -> !psk.real<array<i64: 3, 2>, ["", ""]>
// CHECK-LABEL: func.func @lin.vjp
// CHECK:         call @lin.fwd(
// CHECK:         call @lin.bwd(

// With recompute, the backward replays the forward from the arguments.
// RECOMPUTE-LABEL: func.func @lin.bwd
// RECOMPUTE:         "psk.dot"({{.*}}) {psk.site = "lin/%0"}
// RECOMPUTE:         "psk.dot_vjp_l"
module attributes {psk.entry = @lin_vjp} {
  func.func @lin(%arg0: !psk.real<array<i64: 2, 3>, ["N", ""]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 3, 2>, ["", ""]> {psk.name = "w"}) -> !psk.real<array<i64: 2, 2>, ["N", ""]> attributes {psk.function = "lin"} {
    %0 = "psk.dot"(%arg0, %arg1) {psk.site = "lin/%0"} : (!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> !psk.real<array<i64: 2, 2>, ["N", ""]>
    return %0 : !psk.real<array<i64: 2, 2>, ["N", ""]>
  }
  func.func @lin_vjp(%arg0: !psk.real<array<i64: 2, 3>, ["N", ""]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 3, 2>, ["", ""]> {psk.name = "w"}, %arg2: !psk.real<array<i64: 2, 2>, ["N", ""]> {psk.name = "ct"}) -> tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>> attributes {psk.function = "lin_vjp"} {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk.tuple_append"(%0, %arg0) : (tuple<>, !psk.real<array<i64: 2, 3>, ["N", ""]>) -> tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>>
    %2 = "psk.tuple_append"(%1, %arg1) : (tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>>
    %3 = "psk.vjp"(%2, %arg2) {callee = @lin, psk.callsite = "lin_vjp/%c0"} : (tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>>, !psk.real<array<i64: 2, 2>, ["N", ""]>) -> tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>>
    return %3 : tuple<!psk.real<array<i64: 2, 3>, ["N", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>>
  }
}

// -----

// The vjp of a softmax: y · (ct − Σ ct·y), the sum expanded back over its axis.
// CHECK-LABEL: func.func @sm.bwd
// CHECK:         %[[Y:.*]] = "psk.get"(%arg0) {index = 1 : i64}
// CHECK:         %[[P:.*]] = "psk.mul"(%arg1, %[[Y]]) {psk.site = "sm.bwd/%0"}
// CHECK-NEXT:    %[[S:.*]] = "psk.sum"(%[[P]]) {axes = array<i64: 1>, psk.site = "sm.bwd/%1"}
// CHECK-NEXT:    %[[E:.*]] = "psk.expand"(%[[S]], %[[Y]]) {axes = array<i64: 1>, psk.site = "sm.bwd/%2"}
// CHECK-NEXT:    %[[D:.*]] = "psk.sub"(%arg1, %[[E]]) {psk.site = "sm.bwd/%3"}
// CHECK-NEXT:    "psk.mul"(%[[Y]], %[[D]]) {psk.site = "sm.bwd/%4"}
module attributes {psk.entry = @sm_vjp} {
  func.func @sm(%arg0: !psk.real<array<i64: 2, 4>, ["N", ""]> {psk.name = "x"}) -> !psk.real<array<i64: 2, 4>, ["N", ""]> attributes {psk.function = "sm"} {
    %0 = "psk.softmax"(%arg0) {axis = 1 : i64, psk.site = "sm/%0"} : (!psk.real<array<i64: 2, 4>, ["N", ""]>) -> !psk.real<array<i64: 2, 4>, ["N", ""]>
    return %0 : !psk.real<array<i64: 2, 4>, ["N", ""]>
  }
  func.func @sm_vjp(%arg0: !psk.real<array<i64: 2, 4>, ["N", ""]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 2, 4>, ["N", ""]> {psk.name = "ct"}) -> tuple<!psk.real<array<i64: 2, 4>, ["N", ""]>> attributes {psk.function = "sm_vjp"} {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk.tuple_append"(%0, %arg0) : (tuple<>, !psk.real<array<i64: 2, 4>, ["N", ""]>) -> tuple<!psk.real<array<i64: 2, 4>, ["N", ""]>>
    %2 = "psk.vjp"(%1, %arg1) {callee = @sm, psk.callsite = "sm_vjp/%c0"} : (tuple<!psk.real<array<i64: 2, 4>, ["N", ""]>>, !psk.real<array<i64: 2, 4>, ["N", ""]>) -> tuple<!psk.real<array<i64: 2, 4>, ["N", ""]>>
    return %2 : tuple<!psk.real<array<i64: 2, 4>, ["N", ""]>>
  }
}

// -----

// A value read twice: its complete cotangent is the sum of the two adjoints, and that add
// is marked with the forward site (psk.cotangent_of, which dump --stage sensitivity reads).
// CHECK-LABEL: func.func @sq.bwd
// CHECK-SAME:    {psk.cotangent_of = ["sq/%1"], psk.name = "ct"}
// CHECK:         %[[A:.*]] = "psk.mul"(%arg1, %[[T:.*]]) {psk.site = "sq.bwd/%1"}
// CHECK-NEXT:    %[[B:.*]] = "psk.mul"(%arg1, %[[T]]) {psk.site = "sq.bwd/%2"}
// CHECK-NEXT:    "psk.add"(%[[A]], %[[B]]) {psk.cotangent_of = ["sq/%0"], psk.site = "sq.bwd/%3"}
module attributes {psk.entry = @sq_vjp} {
  func.func @sq(%arg0: !psk.real<array<i64: 2>, ["N"]> {psk.name = "x"}) -> !psk.real<array<i64: 2>, ["N"]> attributes {psk.function = "sq"} {
    %0 = "psk.tanh"(%arg0) {psk.site = "sq/%0"} : (!psk.real<array<i64: 2>, ["N"]>) -> !psk.real<array<i64: 2>, ["N"]>
    %1 = "psk.mul"(%0, %0) {psk.site = "sq/%1"} : (!psk.real<array<i64: 2>, ["N"]>, !psk.real<array<i64: 2>, ["N"]>) -> !psk.real<array<i64: 2>, ["N"]>
    return %1 : !psk.real<array<i64: 2>, ["N"]>
  }
  func.func @sq_vjp(%arg0: !psk.real<array<i64: 2>, ["N"]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 2>, ["N"]> {psk.name = "ct"}) -> tuple<!psk.real<array<i64: 2>, ["N"]>> attributes {psk.function = "sq_vjp"} {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk.tuple_append"(%0, %arg0) : (tuple<>, !psk.real<array<i64: 2>, ["N"]>) -> tuple<!psk.real<array<i64: 2>, ["N"]>>
    %2 = "psk.vjp"(%1, %arg1) {callee = @sq, psk.callsite = "sq_vjp/%c0"} : (tuple<!psk.real<array<i64: 2>, ["N"]>>, !psk.real<array<i64: 2>, ["N"]>) -> tuple<!psk.real<array<i64: 2>, ["N"]>>
    return %2 : tuple<!psk.real<array<i64: 2>, ["N"]>>
  }
}
