// Round trip: presk-opt prints what it parses, and upstream mlir-opt with the IRDL file
// parses presk-opt's output and prints it the same way.
// RUN: presk-opt %s | FileCheck %s
// RUN: presk-opt %s | mlir-opt --irdl-file=%psk_irdl | FileCheck %s
// RUN: presk-opt %s > %t.1.mlir && presk-opt %t.1.mlir > %t.2.mlir && diff %t.1.mlir %t.2.mlir

// CHECK-LABEL: func.func @"Linear{3, 2}.apply"
// CHECK-SAME:    !psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>
// CHECK:         "psk.field"(%arg0) {name = "w"}
// CHECK:         "psk.dot"(%arg1, %{{.*}}) {psk.site = "Linear.apply/%0"}
// CHECK:         "psk.add"(%{{.*}}, %{{.*}}) {psk.site = "Linear.apply/%1"}
func.func @"Linear{3, 2}.apply"(%p: !psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>, %x: !psk.real<array<i64: 4, 3>, ["batch", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]> {
  %w = "psk.field"(%p) {name = "w"} : (!psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>) -> !psk.real<array<i64: 3, 2>, ["", ""]>
  %b = "psk.field"(%p) {name = "b"} : (!psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>) -> !psk.real<array<i64: 2>, [""]>
  %0 = "psk.dot"(%x, %w) {psk.site = "Linear.apply/%0"} : (!psk.real<array<i64: 4, 3>, ["batch", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
  %1 = "psk.add"(%0, %b) {psk.site = "Linear.apply/%1"} : (!psk.real<array<i64: 4, 2>, ["batch", ""]>, !psk.real<array<i64: 2>, [""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
  return %1 : !psk.real<array<i64: 4, 2>, ["batch", ""]>
}

// Masks, index tensors, stacks, folds, tuples and optional operands.
// CHECK-LABEL: func.func @records
// CHECK:         "psk.record_empty"() : () -> !psk.record<[], []>
// CHECK:         "psk.set_field"(%{{.*}}, %arg0) {name = "w"}
func.func @records(%x: !psk.real<array<i64: 2>, [""]>) -> !psk.record<["w"], [!psk.real<array<i64: 2>, [""]>]> {
  %0 = "psk.record_empty"() : () -> !psk.record<[], []>
  %1 = "psk.set_field"(%0, %x) {name = "w"} : (!psk.record<[], []>, !psk.real<array<i64: 2>, [""]>) -> !psk.record<["w"], [!psk.real<array<i64: 2>, [""]>]>
  return %1 : !psk.record<["w"], [!psk.real<array<i64: 2>, [""]>]>
}

// CHECK-LABEL: func.func @structure
// CHECK:         "psk.causal_mask"() {names = ["seq", "seq2"], psk.site = "structure/%0", sizes = array<i64: 4, 4>} : () -> !psk.bool<array<i64: 4, 4>, ["seq", "seq2"]>
// CHECK:         "psk.softmax"(%arg1, %{{.*}}) {axis = 1 : i64, psk.site = "structure/%1"}
// CHECK:         "psk.fold"(%arg0, %{{.*}}) {callee = @"Block{4}.apply"}
// CHECK:         "psk.argmax"({{.*}}) {axis = 1 : i64, psk.site = "structure/%2"} : ({{.*}}) -> !psk.index<array<i64: 4>, ["seq"]>
// CHECK:         "psk.tuple_empty"
// CHECK:         "psk.tuple_append"
func.func @structure(%s: !psk.record<["w"], [!psk.real<array<i64: 2, 4, 4>, ["", "", ""]>]>, %x: !psk.real<array<i64: 4, 4>, ["seq", "seq2"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>, !psk.index<array<i64: 4>, ["seq"]>> {
  %m = "psk.causal_mask"() {names = ["seq", "seq2"], psk.site = "structure/%0", sizes = array<i64: 4, 4>} : () -> !psk.bool<array<i64: 4, 4>, ["seq", "seq2"]>
  %0 = "psk.softmax"(%x, %m) {axis = 1 : i64, psk.site = "structure/%1"} : (!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>, !psk.bool<array<i64: 4, 4>, ["seq", "seq2"]>) -> !psk.real<array<i64: 4, 4>, ["seq", "seq2"]>
  %1 = "psk.fold"(%s, %0) {callee = @"Block{4}.apply"} : (!psk.record<["w"], [!psk.real<array<i64: 2, 4, 4>, ["", "", ""]>]>, !psk.real<array<i64: 4, 4>, ["seq", "seq2"]>) -> !psk.real<array<i64: 4, 4>, ["seq", "seq2"]>
  %2 = "psk.argmax"(%1) {axis = 1 : i64, psk.site = "structure/%2"} : (!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>) -> !psk.index<array<i64: 4>, ["seq"]>
  %t0 = "psk.tuple_empty"() : () -> tuple<>
  %t1 = "psk.tuple_append"(%t0, %1) : (tuple<>, !psk.real<array<i64: 4, 4>, ["seq", "seq2"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>>
  %t = "psk.tuple_append"(%t1, %2) : (tuple<!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>>, !psk.index<array<i64: 4>, ["seq"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>, !psk.index<array<i64: 4>, ["seq"]>>
  return %t : tuple<!psk.real<array<i64: 4, 4>, ["seq", "seq2"]>, !psk.index<array<i64: 4>, ["seq"]>>
}
