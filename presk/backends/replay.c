/* presk's replay of a schedule's launches in one native call (presk/backends/replay.py).

   A step is a kernel, its buffers as (region, offset) pairs, the range [lo, hi) of its
   splittable loop and the number of pieces that range is cut into. presk_replay calls
   the steps' kernels in order, each on the addresses its pairs name in `regions` (a
   call's arena, arguments and constants). A step of one piece is one call of its kernel
   on [lo, hi), on this thread. A step of n pieces is n calls, piece i on
   [lo + (hi - lo) * i / n, lo + (hi - lo) * (i + 1) / n) (the cuts presk/backends/workers.py
   makes), run by this thread and the pool's workers; the next step starts once every
   piece is done. The pieces of a splittable loop write disjoint elements and read nothing
   another writes, so whoever runs them, the bits are those of one call. A kernel takes
   its buffers' addresses by value, then lo and hi; C calls a function through a pointer
   of its own arity, so there is a case for each buffer count up to
   PRESK_REPLAY_BUFFERS. presk_replay_timed does the same, writing each step's time out
   for `presk bench --breakdown` (a split step's time is that of all its pieces).

   The pool. Worker threads are started on first need, as many as a step's workers less
   one (at most PRESK_REPLAY_WORKERS), and live for the process. A step may have more
   pieces than workers: each thread claims the next piece when it is done with one, so a
   thread that runs slower (a core the host has just woken) takes fewer. A split step is a job:
   the caller publishes it by raising a ticket, (generation, pieces, next piece), and
   takes piece 0; each worker, and then the caller, claims the next piece by a
   compare-and-swap on the ticket until none is left, and the caller waits for the pieces
   others claimed. The piece count rides in the ticket so that a ticket with a piece left
   always names a job still running, whose step and regions stay put until it is claimed:
   a worker that read the last job's ticket (no piece left) and then the next job's
   fields could otherwise claim a piece of the next job before it is published, and run
   it twice, or the last job's step on the next call's regions, another schedule's
   arena (tests/test_native_memory.py). A worker
   late to wake finds its pieces taken by the caller: a busy core costs a split step
   about its one-thread time, never a wait for a worker the system has not yet run. An
   idle worker spins on the ticket for SPIN_NS (pausing for PAUSE_NS, then yielding its
   core to any thread that wants it, so a spin takes no share from the caller on a loaded
   machine), then sleeps on a condition variable; presk_replay wakes sleepers at its
   start when it has a split step, so the workers are spinning by the time it reaches it.
   The caller waits for others' pieces the same way, for WAIT_NS before it sleeps. One
   caller uses the pool at a time (a second runs its pieces itself), and a forked child
   starts with no workers (pthread_atfork). */

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define PRESK_REPLAY_BUFFERS 32
#define PRESK_REPLAY_WORKERS 256
#define PAUSE_NS 2000  /* a spin's first part, on the core; then yielding it to others */
#define SPIN_NS 100000 /* an idle worker's spin before it sleeps */
#define WAIT_NS 30000  /* the caller's spin for others' pieces before it sleeps */
#define PIECE_BITS 16  /* the ticket: generation, then the pieces, then the next piece */
#define PIECES ((uint64_t)1 << PIECE_BITS)

typedef struct {
  void *fn;          /* the kernel */
  int64_t buffers;   /* how many buffers it takes */
  const int64_t *at; /* (region, offset in bytes) for each buffer */
  int64_t lo, hi;    /* the range of its splittable loop */
  int64_t pieces;    /* how many pieces [lo, hi) is cut into: 1, unsplit */
  int64_t workers;   /* the threads that claim them, this one included (at most pieces) */
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
    ((void (*)(P##n, int64_t, int64_t))s->fn)(A##n, lo, hi);                         \
    break;

/* The most buffers a step may take: Python keeps a launch of more as a step of its own. */
int presk_replay_buffers(void) { return PRESK_REPLAY_BUFFERS; }

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Step s's kernel on [lo, hi) of its splittable loop. */
static void call(const step *s, void **regions, int64_t lo, int64_t hi) {
  switch (s->buffers) {
    CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6) CALL(7) CALL(8)
    CALL(9) CALL(10) CALL(11) CALL(12) CALL(13) CALL(14) CALL(15) CALL(16)
    CALL(17) CALL(18) CALL(19) CALL(20) CALL(21) CALL(22) CALL(23) CALL(24)
    CALL(25) CALL(26) CALL(27) CALL(28) CALL(29) CALL(30) CALL(31) CALL(32)
  }
}

/* Piece i of n of step s. */
static void piece(const step *s, void **regions, int64_t i, int64_t n) {
  int64_t trips = s->hi - s->lo;
  call(s, regions, s->lo + trips * i / n, s->lo + trips * (i + 1) / n);
}

static void pause_briefly(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ---- the pool ---- */

static struct {
  _Atomic uint64_t ticket;        /* generation, pieces, the next piece to claim: `ticket` */
  _Atomic(const step *) step;     /* the job: its step and regions */
  _Atomic(void **) regions;
  _Atomic int64_t done;           /* pieces claimed from the ticket and finished */
  _Atomic int sleepers;           /* workers asleep, or about to be, on `wake` */
  _Atomic uint64_t nudges;        /* raised to wake sleepers with no job */
  _Atomic int waiting;            /* the caller asleep, or about to be, on `finished` */
  pthread_mutex_t lock;           /* guards the sleeps */
  pthread_cond_t wake;
  pthread_cond_t finished;
  pthread_mutex_t owner;          /* held by the caller publishing a job */
  int workers;                    /* started in this process */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .finished = PTHREAD_COND_INITIALIZER,
          .owner = PTHREAD_MUTEX_INITIALIZER};

static uint64_t ticket(uint64_t generation, int64_t pieces, int64_t next) {
  return generation << 2 * PIECE_BITS | (uint64_t)pieces << PIECE_BITS | (uint64_t)next;
}
static uint64_t generation(uint64_t ticket) { return ticket >> 2 * PIECE_BITS; }
static int64_t pieces_of(uint64_t ticket) { return (int64_t)(ticket >> PIECE_BITS & (PIECES - 1)); }
static int64_t next_piece(uint64_t ticket) { return (int64_t)(ticket & (PIECES - 1)); }

/* A piece claimed from the ticket is done: the last of n wakes a caller asleep on it.
   The caller raises `waiting` before it reads `done`, and this raises `done` before it
   reads `waiting` (all sequentially consistent): one of the two sees the other. */
static void piece_done(int64_t n) {
  if (atomic_fetch_add(&pool.done, 1) + 1 == n - 1 && atomic_load(&pool.waiting)) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_signal(&pool.finished);
    pthread_mutex_unlock(&pool.lock);
  }
}

/* Claim and run pieces of generation `gen` until none is left. */
static void take_pieces(uint64_t gen) {
  for (;;) {
    uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
    if (generation(t) != gen)
      return;
    int64_t n = pieces_of(t), i = next_piece(t);
    if (i >= n)
      return;
    /* Read before the claim, as the caller wrote them for the ticket read or a later one
       (acquire: a later job's, written once this one's pieces were all claimed, comes
       with the ticket moved on, so the claim fails). A claim that succeeds finds a piece
       left, so the job is still running and these are its step and regions. */
    const step *s = atomic_load_explicit(&pool.step, memory_order_acquire);
    void **regions = atomic_load_explicit(&pool.regions, memory_order_acquire);
    if (!atomic_compare_exchange_weak_explicit(&pool.ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_relaxed))
      continue;
    piece(s, regions, i, n);
    piece_done(n);
  }
}

/* Sleep until the ticket leaves generation `seen` or a nudge comes. The sleeper count is
   raised before the ticket is read, and a publisher raises the ticket before it reads
   the count (all sequentially consistent): one of the two sees the other. */
static void sleep_until_job(uint64_t seen) {
  pthread_mutex_lock(&pool.lock);
  uint64_t nudges = atomic_load(&pool.nudges);
  atomic_fetch_add(&pool.sleepers, 1);
  while (generation(atomic_load(&pool.ticket)) == seen && atomic_load(&pool.nudges) == nudges)
    pthread_cond_wait(&pool.wake, &pool.lock);
  atomic_fetch_sub(&pool.sleepers, 1);
  pthread_mutex_unlock(&pool.lock);
}

/* One turn of a spin begun at `start`: a pause for its first PAUSE_NS, then the core
   yielded to any other thread that wants it (on a loaded machine a spin on the core would
   take a share of the cores from the caller's own thread). Whether it has lasted `spin`. */
static int spun(int64_t start, int64_t spin) {
  int64_t spent = now_ns() - start;
  if (spent < PAUSE_NS)
    pause_briefly();
  else
    sched_yield();
  return spent > spin;
}

/* The ticket of the first generation after `seen`: spinning SPIN_NS, then asleep. */
static uint64_t await_job(uint64_t seen) {
  for (int64_t start = now_ns();;) {
    uint64_t t = atomic_load_explicit(&pool.ticket, memory_order_acquire);
    if (generation(t) != seen)
      return t;
    if (spun(start, SPIN_NS)) {
      sleep_until_job(seen);
      start = now_ns();
    }
  }
}

static void *worker(void *first) {
  uint64_t seen = (uint64_t)(uintptr_t)first;
  for (;;) {
    seen = generation(await_job(seen));
    take_pieces(seen);
  }
  return 0;
}

static void wake_sleepers(void) {
  if (atomic_load(&pool.sleepers) > 0) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
  }
}

/* A fork while a worker holds `lock` leaves it locked in the child: the prepare handler
   takes it, so no worker does across the fork. The child has none of the parent's
   threads: it starts with none and fresh locks. */
static void before_fork(void) { pthread_mutex_lock(&pool.lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&pool.lock); }
static void after_fork_child(void) {
  pthread_mutex_init(&pool.lock, 0);
  pthread_cond_init(&pool.wake, 0);
  pthread_cond_init(&pool.finished, 0);
  pthread_mutex_init(&pool.owner, 0);
  atomic_store(&pool.sleepers, 0);
  atomic_store(&pool.waiting, 0);
  pool.workers = 0;
}
static void register_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Start workers until there are `want` (at most PRESK_REPLAY_WORKERS), with every signal
   blocked (signals are the caller's); called holding `owner`. The workers there are. */
static int start_workers(int want) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handlers);
  if (want > PRESK_REPLAY_WORKERS)
    want = PRESK_REPLAY_WORKERS;
  if (pool.workers >= want)
    return pool.workers;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  uint64_t gen = generation(atomic_load(&pool.ticket));
  for (pthread_t t; pool.workers < want; pool.workers++)
    if (pthread_create(&t, &attr, worker, (void *)(uintptr_t)gen) != 0)
      break;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, 0);
  return pool.workers;
}

/* Wait until the n - 1 pieces claimed from the ticket are done: spinning WAIT_NS (pieces
   are about equal, so a worker that started with the caller ends about with it), then
   asleep, leaving this core to a worker the system preempted mid-piece. */
static void await_pieces(int64_t n) {
  int64_t start = now_ns();
  while (atomic_load_explicit(&pool.done, memory_order_acquire) < n - 1) {
    if (spun(start, WAIT_NS)) {
      pthread_mutex_lock(&pool.lock);
      atomic_store(&pool.waiting, 1);
      while (atomic_load(&pool.done) < n - 1)
        pthread_cond_wait(&pool.finished, &pool.lock);
      atomic_store(&pool.waiting, 0);
      pthread_mutex_unlock(&pool.lock);
    }
  }
}

/* Every piece of a split step, on this thread: when another caller has the pool, or no
   worker could be started. */
static void pieces_here(const step *s, void **regions, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    piece(s, regions, i, n);
}

/* Step s's n pieces on the pool and this thread, returning when all are done. */
static void split(const step *s, void **regions, int64_t n) {
  if ((uint64_t)n >= PIECES || pthread_mutex_trylock(&pool.owner) != 0) {
    pieces_here(s, regions, n);
    return;
  }
  if (start_workers((int)s->workers - 1) == 0) {
    pthread_mutex_unlock(&pool.owner);
    pieces_here(s, regions, n);
    return;
  }
  atomic_store_explicit(&pool.step, s, memory_order_release);
  atomic_store_explicit(&pool.regions, regions, memory_order_release);
  atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
  uint64_t gen = generation(atomic_load(&pool.ticket)) + 1;
  atomic_store(&pool.ticket, ticket(gen, n, 1)); /* piece 0 is this thread's */
  wake_sleepers();
  piece(s, regions, 0, n);
  take_pieces(gen);
  await_pieces(n);
  pthread_mutex_unlock(&pool.owner);
}

/* Wake sleeping workers ahead of the first split step, so they spin by then. */
static void nudge(const step *steps, int n) {
  for (const step *s = steps; s < steps + n; s++)
    if (s->pieces > 1) {
      atomic_fetch_add(&pool.nudges, 1);
      wake_sleepers();
      return;
    }
}

/* The steps in order; with `ns`, each step's nanoseconds written to it (a breakdown),
   the clock read once between two steps. */
static void replay(const step *steps, int n, void **regions, int64_t *ns) {
  nudge(steps, n);
  int64_t last = ns ? now_ns() : 0;
  for (const step *s = steps; s < steps + n; s++) {
    if (s->pieces > 1)
      split(s, regions, s->pieces);
    else
      call(s, regions, s->lo, s->hi);
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

/* Bytes [lo, hi) of src copied to dst, called as a kernel is: a fold's layers stacked
   (presk/backends/schedule.py) run as steps of a segment instead of host work between
   two. */
void presk_copy(const void *src, void *dst, int64_t lo, int64_t hi) {
  memcpy((char *)dst + lo, (const char *)src + lo, (size_t)(hi - lo));
}
