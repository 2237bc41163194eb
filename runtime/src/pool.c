/* ------------------------------------------------------------------------ */
/* The thread pool (issue 26): worker threads created once and reused, so a
 * kernel can split its work over cores for a few microseconds of dispatch
 * instead of a thread start per call (~10-30 us, as bcrt_gemm_small_mt
 * pays).  Generated code takes a `bcrt_pool *` (NULL: the calling thread
 * only, nothing needed); the caller creates it, and may share it between
 * models and threads.
 *
 * A job is `ntasks` calls fn(arg, task, ntasks); the threads, the
 * caller's included, claim tasks from a counter until none is left.  The
 * kernels split so that every output element is computed by one task with
 * the same arithmetic whatever the split and whichever thread runs it,
 * which makes results bit-identical for any thread count and schedule.
 * One job at a time: a second caller (another thread, or another model
 * sharing the pool) waits for the first job to finish.  A task must not run
 * a job on its own pool.
 *
 * Workers spin briefly on the pool's state before sleeping on a condition
 * variable: a decode step dispatches ~50 jobs in a few milliseconds, and a
 * futex wake-up per job would cost more than the split saves.  The caller
 * never waits for a worker that has not joined the job (one the OS did not
 * run: the cores are shared), so a busy machine slows a job down to the
 * caller's own pace, not to the scheduler's time slice.  Without
 * POSIX threads (or with -DBLOCKC_NO_THREADS, or -DBLOCKC_NO_IO) a pool has
 * one thread and jobs run serially on the caller's. */
#if !defined(BLOCKC_NO_THREADS) && (defined(__unix__) || defined(__APPLE__)) && \
    (defined(__GNUC__) || defined(__clang__))
#include <pthread.h>
#define PL_THREADS 1
/* gcc's and clang's __atomic builtins: C99 builds of the runtime (vendored
 * code) have no <stdatomic.h>. */
#define PL_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define PL_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#endif

#ifdef PL_THREADS
/* Spins before sleeping: ~50-100 us on current x86 cores. */
enum { PL_SPIN = 20000 };

#if defined(__x86_64__) || defined(__i386__)
#define PL_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define PL_PAUSE() __asm__ __volatile__("yield")
#else
#define PL_PAUSE() ((void)0)
#endif

/* The pool's state word: the job's generation in the high 32 bits, then
 * the workers inside the job (bits 1..31, in steps of PL_IN), and bit 0
 * set while the job is open.  A worker joins an open job by one CAS, and
 * only a worker inside reads the job's fields; the caller closes the job
 * when every task is claimed and waits for the workers inside alone, so
 * a worker the OS has not run yet (another process on the cores) is never
 * waited for: the caller has taken its tasks. */
#define PL_OPEN 1ull
#define PL_IN 2ull
#define PL_INSIDE(s) (((s) & 0xffffffffull) >> 1)
#define PL_GEN(s) ((unsigned)((s) >> 32))

struct bcrt_pool {
  int n;                    /* threads, the caller's included */
  int nstarted;             /* workers running (n - 1 once created) */
  pthread_mutex_t run_lock; /* one job at a time */
  pthread_mutex_t m;        /* guards the sleeps below */
  pthread_cond_t wake, done;
  unsigned long long state; /* atomic (PL_LOAD, __atomic_*) */
  int next;                 /* the next task to claim (atomic) */
  int stop;                 /* atomic */
  bcrt_task_fn fn;          /* the current job, set before it opens */
  void *arg;
  int ntasks;
  pthread_t *tid;
};

/* Claims and runs tasks until none is left. */
static void pl_claim(struct bcrt_pool *p) {
  for (;;) {
    int t = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
    if (t >= p->ntasks) return;
    p->fn(p->arg, t, p->ntasks);
  }
}

static void *pl_main(void *arg) {
  struct bcrt_pool *p = (struct bcrt_pool *)arg;
  unsigned seen = 0;
  for (;;) {
    unsigned long long s = PL_LOAD(&p->state);
    for (int k = 0; PL_GEN(s) == seen && k < PL_SPIN; k++) {
      PL_PAUSE();
      s = PL_LOAD(&p->state);
    }
    if (PL_GEN(s) == seen) {
      pthread_mutex_lock(&p->m);
      while (PL_GEN(s = PL_LOAD(&p->state)) == seen)
        pthread_cond_wait(&p->wake, &p->m);
      pthread_mutex_unlock(&p->m);
    }
    seen = PL_GEN(s);
    if (PL_LOAD(&p->stop)) return NULL;
    /* join the job if it is still open */
    while ((s & PL_OPEN) && PL_GEN(s) == seen &&
           !__atomic_compare_exchange_n(&p->state, &s, s + PL_IN, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
    }
    if (!(s & PL_OPEN) || PL_GEN(s) != seen) continue; /* closed (or gone) before we came */
    pl_claim(p);
    s = __atomic_sub_fetch(&p->state, PL_IN, __ATOMIC_ACQ_REL);
    if (!(s & PL_OPEN) && PL_INSIDE(s) == 0) { /* the caller may be waiting for us */
      pthread_mutex_lock(&p->m);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->m);
    }
  }
}

/* Publishes state s (a new generation) and wakes every worker. */
static void pl_publish(struct bcrt_pool *p, unsigned long long s) {
  pthread_mutex_lock(&p->m);
  PL_STORE(&p->state, s);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->m);
}

static void pl_stop(struct bcrt_pool *p) {
  PL_STORE(&p->stop, 1);
  unsigned long long s = PL_LOAD(&p->state);
  pl_publish(p, (unsigned long long)(PL_GEN(s) + 1u) << 32);
  for (int i = 0; i < p->nstarted; i++) pthread_join(p->tid[i], NULL);
}

bcrt_pool *bcrt_pool_create(int nthreads) {
  if (nthreads < 1 || nthreads > BCRT_POOL_MAX_THREADS) return NULL;
  struct bcrt_pool *p = (struct bcrt_pool *)calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = nthreads;
  p->tid = (pthread_t *)calloc((size_t)nthreads, sizeof *p->tid);
  int ok = p->tid != NULL;
  int inits = 0;
  if (ok && pthread_mutex_init(&p->run_lock, NULL) == 0) inits |= 1;
  if (ok && pthread_mutex_init(&p->m, NULL) == 0) inits |= 2;
  if (ok && pthread_cond_init(&p->wake, NULL) == 0) inits |= 4;
  if (ok && pthread_cond_init(&p->done, NULL) == 0) inits |= 8;
  ok = ok && inits == 15;
  for (int i = 1; ok && i < nthreads; i++) {
    if (pthread_create(&p->tid[i - 1], NULL, pl_main, p) != 0) ok = 0;
    else p->nstarted++;
  }
  if (ok) return p;
  if (inits == 15) pl_stop(p);
  if (inits & 1) pthread_mutex_destroy(&p->run_lock);
  if (inits & 2) pthread_mutex_destroy(&p->m);
  if (inits & 4) pthread_cond_destroy(&p->wake);
  if (inits & 8) pthread_cond_destroy(&p->done);
  free(p->tid);
  free(p);
  return NULL;
}

void bcrt_pool_free(bcrt_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->run_lock); /* a job in flight finishes first */
  pl_stop(p);
  pthread_mutex_unlock(&p->run_lock);
  pthread_mutex_destroy(&p->run_lock);
  pthread_mutex_destroy(&p->m);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  free(p->tid);
  free(p);
}

int bcrt_pool_nthreads(const bcrt_pool *p) { return p ? p->n : 1; }

void bcrt_pool_run(bcrt_pool *p, int ntasks, bcrt_task_fn fn, void *arg) {
  if (ntasks <= 0 || !fn) return;
  if (!p || p->n == 1 || ntasks == 1) {
    for (int t = 0; t < ntasks; t++) fn(arg, t, ntasks);
    return;
  }
  pthread_mutex_lock(&p->run_lock);
  p->fn = fn;
  p->arg = arg;
  p->ntasks = ntasks;
  __atomic_store_n(&p->next, 0, __ATOMIC_RELAXED);
  unsigned long long s = PL_LOAD(&p->state);
  pl_publish(p, ((unsigned long long)(PL_GEN(s) + 1u) << 32) | PL_OPEN);
  pl_claim(p);
  /* every task is claimed: close the job, then wait for the workers inside */
  s = __atomic_and_fetch(&p->state, ~PL_OPEN, __ATOMIC_ACQ_REL);
  for (int k = 0; PL_INSIDE(s) && k < PL_SPIN; k++) {
    PL_PAUSE();
    s = PL_LOAD(&p->state);
  }
  if (PL_INSIDE(s)) {
    pthread_mutex_lock(&p->m);
    while (PL_INSIDE(PL_LOAD(&p->state)))
      pthread_cond_wait(&p->done, &p->m);
    pthread_mutex_unlock(&p->m);
  }
  pthread_mutex_unlock(&p->run_lock);
}

#else /* no threads: a pool of one, jobs on the caller's thread */

struct bcrt_pool {
  int n;
};

#ifndef BLOCKC_NO_IO
bcrt_pool *bcrt_pool_create(int nthreads) {
  if (nthreads < 1 || nthreads > BCRT_POOL_MAX_THREADS) return NULL;
  struct bcrt_pool *p = (struct bcrt_pool *)calloc(1, sizeof *p);
  if (p) p->n = 1;
  return p;
}

void bcrt_pool_free(bcrt_pool *p) { free(p); }
#endif

int bcrt_pool_nthreads(const bcrt_pool *p) { return p ? p->n : 1; }

void bcrt_pool_run(bcrt_pool *p, int ntasks, bcrt_task_fn fn, void *arg) {
  (void)p;
  if (!fn) return;
  for (int t = 0; t < ntasks; t++) fn(arg, t, ntasks);
}
#endif
