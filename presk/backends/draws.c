/* Dropout's keep mask in C, drawn as numpy draws it: compiled into the replay runtime
   (presk/backends/replay.py), run as a step of a segment.

   presk/runtime/rng.py draws every random number from numpy's Philox generator, keyed by
   a hash of the seed and the draw's path; dropout keeps an element where its uniform
   draw is at least the rate (`LaunchPlan.keep`, presk/backends/launch.py). numpy fills
   that draw an element at a time through the generator's buffer, 5-9 ns an element on
   the machines of docs/performance.md: a sixth of the corpus GPT's training step. This
   is the same stream. numpy's Philox is Random123's Philox4x64 with 10 rounds on a
   256-bit counter that starts at 0 and is raised before each block of four 64-bit
   words, so word i of the stream is word i % 4 of the block whose counter is i / 4 + 1;
   a draw in [0, 1) is the word's top 53 bits u times 2^-53, exactly, so "u 2^-53 >= rate"
   is "u >= ceil(rate 2^53)", one integer comparison. Element i depends on i alone: a
   mask may be filled in any pieces, on any threads, with numpy's bits
   (tests/test_draws.py).

   presk_dropout_keep(key, mask, lo, hi) is called as the runtime calls a kernel: its
   buffers, then the range [lo, hi) of elements it fills. key holds the generator's key
   (two words, least significant first, as numpy's `Philox(key=k)` splits k) and the
   bits of the rate, a double. */

#include <stdint.h>
#include <string.h>

#define M0 0xD2E7470EE14C6C93ULL /* Random123's Philox4x64 multipliers */
#define M1 0xCA5A826395121157ULL
#define W0 0x9E3779B97F4A7C15ULL /* and its key schedule's increments */
#define W1 0xBB67AE8584CAA73BULL
#define ROUNDS 10

/* One round on the block (x0, x1, x2, x3) under the round's key (k0, k1). */
#define ROUND(x0, x1, x2, x3, k0, k1)                                                  \
  {                                                                                  \
    __uint128_t p0 = (__uint128_t)M0 * x0, p1 = (__uint128_t)M1 * x2;                 \
    uint64_t y0 = (uint64_t)(p1 >> 64) ^ x1 ^ k0, y2 = (uint64_t)(p0 >> 64) ^ x3 ^ k1; \
    x1 = (uint64_t)p1, x3 = (uint64_t)p0, x0 = y0, x2 = y2;                          \
  }

/* The blocks whose counters are c and c + 1, their words in out: two at once, so that
   one's chain of multiplies runs while the other's waits. */
static void philox2(uint64_t c, const uint64_t k0[ROUNDS], const uint64_t k1[ROUNDS],
                    uint64_t out[8]) {
  uint64_t a0 = c, a1 = 0, a2 = 0, a3 = 0, b0 = c + 1, b1 = 0, b2 = 0, b3 = 0;
#pragma GCC unroll 10
  for (int r = 0; r < ROUNDS; r++) {
    ROUND(a0, a1, a2, a3, k0[r], k1[r])
    ROUND(b0, b1, b2, b3, k0[r], k1[r])
  }
  out[0] = a0, out[1] = a1, out[2] = a2, out[3] = a3;
  out[4] = b0, out[5] = b1, out[6] = b2, out[7] = b3;
}

/* ceil(rate 2^53): the least u of 53 bits with u 2^-53 >= rate (2^53, none, for a NaN). */
static uint64_t threshold(double rate) {
  if (!(rate > 0)) return rate != rate ? (uint64_t)1 << 53 : 0;
  if (rate > 1) return (uint64_t)1 << 53;
  double s = rate * 0x1p53;
  uint64_t t = (uint64_t)s;
  return t + ((double)t < s);
}

void presk_dropout_keep(const uint64_t *key, int8_t *mask, int64_t lo, int64_t hi) {
  double rate;
  memcpy(&rate, &key[2], sizeof rate);
  uint64_t t = threshold(rate), k0[ROUNDS], k1[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) k0[r] = key[0] + r * W0, k1[r] = key[1] + r * W1;
  for (int64_t block = lo / 8 * 2; block * 4 < hi; block += 2) {
    uint64_t words[8];
    philox2((uint64_t)block + 1, k0, k1, words);
    int64_t at = block * 4, first = at < lo ? lo - at : 0, end = at + 8 > hi ? hi - at : 8;
    for (int64_t w = first; w < end; w++) mask[at + w] = words[w] >> 11 >= t;
  }
}
