// A linear layer in PSK-Core, written by hand: y = x · w + b at batch 4.
// `presk dump --stage core` writes such modules from PSK programs; this one is for
// trying presk-opt on its own: presk-opt tutorial/00_linear_core.mlir \
//   --pass-pipeline='builtin.module(psk-verify,psk-dce)' --print-ir-after-all
func.func @"Linear{3, 2}.apply"(%p: !psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>, %x: !psk.real<array<i64: 4, 3>, ["batch", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]> {
  %w = "psk.field"(%p) {name = "w"} : (!psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>) -> !psk.real<array<i64: 3, 2>, ["", ""]>
  %b = "psk.field"(%p) {name = "b"} : (!psk.record<["w", "b"], [!psk.real<array<i64: 3, 2>, ["", ""]>, !psk.real<array<i64: 2>, [""]>]>) -> !psk.real<array<i64: 2>, [""]>
  %0 = "psk.dot"(%x, %w) {psk.site = "Linear.apply/%0"} : (!psk.real<array<i64: 4, 3>, ["batch", ""]>, !psk.real<array<i64: 3, 2>, ["", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
  %1 = "psk.add"(%0, %b) {psk.site = "Linear.apply/%1"} : (!psk.real<array<i64: 4, 2>, ["batch", ""]>, !psk.real<array<i64: 2>, [""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
  %unused = "psk.exp"(%1) {psk.site = "Linear.apply/%2"} : (!psk.real<array<i64: 4, 2>, ["batch", ""]>) -> !psk.real<array<i64: 4, 2>, ["batch", ""]>
  return %1 : !psk.real<array<i64: 4, 2>, ["batch", ""]>
}
