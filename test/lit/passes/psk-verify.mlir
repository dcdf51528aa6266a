// RUN: not presk-opt %s --split-input-file --pass-pipeline='builtin.module(psk-verify)' 2>/dev/null | FileCheck %s
// RUN: not presk-opt %s --split-input-file --pass-pipeline='builtin.module(psk-verify)' 2>&1 >/dev/null | FileCheck %s --check-prefix=ERR

// A well-formed function passes unchanged.
// CHECK-LABEL: func.func @ok
// CHECK: "psk.add"(%arg0, %arg0) {psk.site = "ok/%0"}
func.func @ok(%x: !psk.real<array<i64: 4, 2>, ["batch", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]> {
  %0 = "psk.add"(%x, %x) {psk.site = "ok/%0"} : (!psk.real<array<i64: 4, 2>, ["batch", ""]>, !psk.real<array<i64: 4, 2>, ["batch", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
  return %0 : !psk.real<array<i64: 4, 2>, ["batch", ""]>
}

// -----

// ERR: psk-verify.mlir:[[@LINE+2]]:8: error: psk-verify: axis name 'batch' appears twice in ℝ[batch: 4, batch: 4]
func.func @twice(%x: !psk.real<array<i64: 4, 4>, ["batch", "batch"]>) {
  %0 = "psk.exp"(%x) {psk.site = "twice/%0"} : (!psk.real<array<i64: 4, 4>, ["batch", "batch"]>) -> !psk.real<array<i64: 4, 4>, ["batch", "batch"]>
  return
}

// -----

// ERR: psk-verify.mlir:[[@LINE+3]]:8: error: psk-verify: 'psk.exp' has no psk.site
func.func @nosite(%x: !psk.real<array<i64: 4>, [""]>) {
  %0 = "psk.exp"(%x) {psk.site = "nosite/%0"} : (!psk.real<array<i64: 4>, [""]>) -> !psk.real<array<i64: 4>, [""]>
  %1 = "psk.exp"(%0) : (!psk.real<array<i64: 4>, [""]>) -> !psk.real<array<i64: 4>, [""]>
  return
}

// -----

// ERR: psk-verify.mlir:[[@LINE+3]]:8: error: psk-verify: site dup/%0 is used twice
func.func @dup(%x: !psk.real<array<i64: 4>, [""]>) {
  %0 = "psk.exp"(%x) {psk.site = "dup/%0"} : (!psk.real<array<i64: 4>, [""]>) -> !psk.real<array<i64: 4>, [""]>
  %1 = "psk.exp"(%0) {psk.site = "dup/%0"} : (!psk.real<array<i64: 4>, [""]>) -> !psk.real<array<i64: 4>, [""]>
  return
}

// -----

// ERR: psk-verify.mlir:[[@LINE+2]]:8: error: psk-verify: malformed type
func.func @names(%x: !psk.real<array<i64: 4, 2>, ["batch"]>) {
  %0 = "psk.exp"(%x) {psk.site = "names/%0"} : (!psk.real<array<i64: 4, 2>, ["batch"]>) -> !psk.real<array<i64: 4, 2>, ["batch"]>
  return
}
