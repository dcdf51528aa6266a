// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-tile{m=1 n=4},psk-split{depth=1 workers=1},psk-kernel-to-affine)' | FileCheck %s
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-tile{m=1 n=4},psk-kblock{size=2 order=KIJ},psk-split{depth=0 workers=1})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-tile{m=1 n=4},psk-pack{operands=b},psk-order{order=JI},psk-split{depth=0 workers=1},psk-kernel-to-affine)' | FileCheck %s --check-prefix=OWN
// RUN: presk-opt %s --pass-pipeline='builtin.module(psk-tile{m=1 n=4},psk-pack{operands=b},psk-split{depth=0 workers=1},psk-kernel-to-affine)' | FileCheck %s --check-prefix=ALL
// RUN: not presk-opt %s --pass-pipeline='builtin.module(psk-tile{m=1 n=4},psk-split{depth=0 workers=3})' 2>&1 | FileCheck %s --check-prefix=WORKERS

// The loop at depth 1 (the column blocks) runs from lo to hi; the host divides its one
// trip among the workers, each running the row loop around it in full.
// CHECK-LABEL: func.func @k0.dot(
// CHECK-SAME:    split = array<i64: 1, 1>
// CHECK-SAME:    psk_kernel.split = 1 : i64
// CHECK-SAME:    psk_kernel.workers = 1 : i64
// CHECK:         affine.for %{{.*}} = 0 to 4 {
// CHECK-NEXT:      affine.for %{{.*}} = %arg3 to %arg4 {

// Split over J's blocks, a worker packs b's panels of its own blocks alone (the panel
// loop runs from lo to hi too); split over I's, each worker packs every panel.
// OWN:         affine.for %{{.*}} = %arg3 to %arg4 {
// OWN:         } {psk_kernel.panels, psk_kernel.parallel}
// OWN-NEXT:    affine.for %{{.*}} = %arg3 to %arg4 {
// ALL:         affine.for %{{.*}} = 0 to 1 {
// ALL:         } {psk_kernel.panels, psk_kernel.parallel}
// ALL-NEXT:    affine.for %{{.*}} = %arg3 to %arg4 {

// BAD: error[E7002]: nest k0.dot: layout {{.*}}: a split at depth 0: the loops down to it are not all parallel
// WORKERS: error[E7002]: nest k0.dot: layout {{.*}}: a split over 3 workers: the machine's {{[0-9]+}}, or half of it
module attributes {psk.dims = {I = 4 : i64, J = 4 : i64, K = 4 : i64}, psk.entry = @dot_big, psk.params = [], psk.program = "tests/data/layouts.psk", psk_kernel.type = "f32"} {
  func.func @dot_big(%arg0: !psk.real<array<i64: 4, 4>, ["I", "K"]> {psk.name = "x"}, %arg1: !psk.real<array<i64: 4, 4>, ["K", "J"]> {psk.name = "w"}) -> !psk.real<array<i64: 4, 4>, ["I", "J"]> attributes {psk.function = "dot_big"} {
    %0 = "psk.tuple_empty"() : () -> tuple<>
    %1 = "psk.tuple_append"(%0, %arg0) : (tuple<>, !psk.real<array<i64: 4, 4>, ["I", "K"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>>
    %2 = "psk.tuple_append"(%1, %arg1) : (tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>>, !psk.real<array<i64: 4, 4>, ["K", "J"]>) -> tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>, !psk.real<array<i64: 4, 4>, ["K", "J"]>>
    %3 = "psk_kernel.launch"(%2) {kernel = @k0.dot, psk.site = "dot_big/%0"} : (tuple<!psk.real<array<i64: 4, 4>, ["I", "K"]>, !psk.real<array<i64: 4, 4>, ["K", "J"]>>) -> !psk.real<array<i64: 4, 4>, ["I", "J"]>
    return %3 : !psk.real<array<i64: 4, 4>, ["I", "J"]>
  }
  func.func @k0.dot(%arg0: !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "K"]>, %arg1: !psk_kernel.buffer<f32, array<i64: 4, 4>, ["K", "J"]>, %arg2: !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>) attributes {psk_kernel.contraction = {a = ["o0", "k0"], b = ["k0", "o1"], k = array<i64: 4>, kind = "dot"}, psk_kernel.kernel = "dot", psk_kernel.layout = {form = "rowwise", kblock = 0 : i64, lanes = 1 : i64, order = "IJ", pack = "none", tile = array<i64: 1, 1>}, psk_kernel.ops = 1 : i64, psk_kernel.type = "f32"} {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.000000e+00 : f32
    scf.for %arg3 = %c0 to %c4 step %c1 {
      scf.for %arg4 = %c0 to %c4 step %c1 {
        "psk_kernel.store"(%cst, %arg2, %arg3, %arg4) : (f32, !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>, index, index) -> ()
      } {psk_kernel.parallel}
      scf.for %arg4 = %c0 to %c4 step %c1 {
        %0 = "psk_kernel.load"(%arg0, %arg3, %arg4) : (!psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "K"]>, index, index) -> f32
        scf.for %arg5 = %c0 to %c4 step %c1 {
          %1 = "psk_kernel.load"(%arg1, %arg4, %arg5) : (!psk_kernel.buffer<f32, array<i64: 4, 4>, ["K", "J"]>, index, index) -> f32
          %2 = "psk_kernel.load"(%arg2, %arg3, %arg5) : (!psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>, index, index) -> f32
          %3 = arith.mulf %0, %1 : f32
          %4 = arith.addf %2, %3 : f32
          "psk_kernel.store"(%4, %arg2, %arg3, %arg5) : (f32, !psk_kernel.buffer<f32, array<i64: 4, 4>, ["I", "J"]>, index, index) -> ()
        } {psk_kernel.parallel}
      }
    } {psk_kernel.parallel}
    return
  }
}
