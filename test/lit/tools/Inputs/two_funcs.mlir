func.func @f(%x: !psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]> {
  %0 = "psk.exp"(%x) {psk.site = "f/%0"} : (!psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  %1 = "psk.log"(%x) {psk.site = "f/%1"} : (!psk.real<array<i64: 3>, [""]>) -> !psk.real<array<i64: 3>, [""]>
  return %0 : !psk.real<array<i64: 3>, [""]>
}
// -----
func.func @g() -> i32 {
  %c = arith.constant 1 : i32
  %d = arith.addi %c, %c : i32
  return %d : i32
}
