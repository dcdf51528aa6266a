/* presk's replay of a schedule's launches in one native call (presk/backends/replay.py).

   A step is a kernel, its buffers as (region, offset) pairs and the range [lo, hi) of its
   splittable loop. presk_replay calls the steps' kernels in order, on one thread, each on
   the addresses its pairs name in `regions` (a call's arena, arguments and constants):
   the calls a step-by-step replay makes from Python, so the same bits. A kernel takes
   its buffers' addresses by value, then lo and hi; C calls a function through a pointer
   of its own arity, so there is a case for each buffer count up to
   PRESK_REPLAY_BUFFERS. presk_replay_timed does the same, writing each step's time out
   for `presk bench --breakdown`. */

#include <stdint.h>
#include <time.h>

#define PRESK_REPLAY_BUFFERS 32

typedef struct {
  void *fn;          /* the kernel */
  int64_t buffers;   /* how many buffers it takes */
  const int64_t *at; /* (region, offset in bytes) for each buffer */
  int64_t lo, hi;    /* the range of its splittable loop */
} step;

/* The address of buffer i of step s. */
#define B(i) ((char *)regions[s->at[2 * (i)]] + s->at[2 * (i) + 1])

/* Pn: n pointer parameters; An: the first n buffers' addresses. */
#define P1 void *
#define P2 P1, void *
#define P3 P2, void *
#define P4 P3, void *
#define P5 P4, void *
#define P6 P5, void *
#define P7 P6, void *
#define P8 P7, void *
#define P9 P8, void *
#define P10 P9, void *
#define P11 P10, void *
#define P12 P11, void *
#define P13 P12, void *
#define P14 P13, void *
#define P15 P14, void *
#define P16 P15, void *
#define P17 P16, void *
#define P18 P17, void *
#define P19 P18, void *
#define P20 P19, void *
#define P21 P20, void *
#define P22 P21, void *
#define P23 P22, void *
#define P24 P23, void *
#define P25 P24, void *
#define P26 P25, void *
#define P27 P26, void *
#define P28 P27, void *
#define P29 P28, void *
#define P30 P29, void *
#define P31 P30, void *
#define P32 P31, void *
#define A1 B(0)
#define A2 A1, B(1)
#define A3 A2, B(2)
#define A4 A3, B(3)
#define A5 A4, B(4)
#define A6 A5, B(5)
#define A7 A6, B(6)
#define A8 A7, B(7)
#define A9 A8, B(8)
#define A10 A9, B(9)
#define A11 A10, B(10)
#define A12 A11, B(11)
#define A13 A12, B(12)
#define A14 A13, B(13)
#define A15 A14, B(14)
#define A16 A15, B(15)
#define A17 A16, B(16)
#define A18 A17, B(17)
#define A19 A18, B(18)
#define A20 A19, B(19)
#define A21 A20, B(20)
#define A22 A21, B(21)
#define A23 A22, B(22)
#define A24 A23, B(23)
#define A25 A24, B(24)
#define A26 A25, B(25)
#define A27 A26, B(26)
#define A28 A27, B(27)
#define A29 A28, B(28)
#define A30 A29, B(29)
#define A31 A30, B(30)
#define A32 A31, B(31)

#define CALL(n)                                                                      \
  case n:                                                                            \
    ((void (*)(P##n, int64_t, int64_t))s->fn)(A##n, s->lo, s->hi);                   \
    break;

/* The most buffers a step may take: Python keeps a launch of more as a step of its own. */
int presk_replay_buffers(void) { return PRESK_REPLAY_BUFFERS; }

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The steps in order; with `ns`, each step's nanoseconds written to it (a breakdown),
   the clock read once between two steps. */
static void replay(const step *steps, int n, void **regions, int64_t *ns) {
  int64_t last = ns ? now_ns() : 0;
  for (const step *s = steps; s < steps + n; s++) {
    switch (s->buffers) {
      CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6) CALL(7) CALL(8)
      CALL(9) CALL(10) CALL(11) CALL(12) CALL(13) CALL(14) CALL(15) CALL(16)
      CALL(17) CALL(18) CALL(19) CALL(20) CALL(21) CALL(22) CALL(23) CALL(24)
      CALL(25) CALL(26) CALL(27) CALL(28) CALL(29) CALL(30) CALL(31) CALL(32)
    }
    if (ns) {
      int64_t now = now_ns();
      ns[s - steps] = now - last;
      last = now;
    }
  }
}

void presk_replay(const step *steps, int n, void **regions) { replay(steps, n, regions, 0); }

void presk_replay_timed(const step *steps, int n, void **regions, int64_t *ns) {
  replay(steps, n, regions, ns);
}
