/* ------------------------------------------------------------------------ */
/* The thread pool (issue 26): worker threads created once and reused, so a
 * kernel can split its work over cores for a few microseconds of dispatch
 * instead of a thread start per call (~10-30 us, as bcrt_gemm_small_mt
 * pays).  Generated code takes a `bcrt_pool *` (NULL: the calling thread
 * only, nothing needed); the caller creates it, and may share it between
 * models and threads.
 *
 * A job is `ntasks` calls fn(arg, task, ntasks); the caller's thread runs
 * its share too.  Task t runs on thread t mod nthreads (a static schedule:
 * which thread computes what never depends on timing).  The kernels split
 * so that every output element is computed by one task with the same
 * arithmetic whatever the split, which makes results bit-identical for any
 * thread count.  One job at a time: a second caller (another thread, or
 * another model sharing the pool) waits for the first job to finish.  A
 * task must not run a job on its own pool.
 *
 * Workers spin briefly on the job counter before sleeping on a condition
 * variable: a decode step dispatches ~50 jobs in a few milliseconds, and a
 * futex wake-up per job would cost more than the split saves.  Without
 * POSIX threads (or with -DBLOCKC_NO_THREADS, or -DBLOCKC_NO_IO) a pool has
 * one thread and jobs run serially on the caller's. */
#if !defined(BLOCKC_NO_THREADS) && (defined(__unix__) || defined(__APPLE__)) && \
    !defined(__STDC_NO_ATOMICS__)
#include <pthread.h>
#include <stdatomic.h>
#define PL_THREADS 1
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

typedef struct pl_worker {
  struct bcrt_pool *pool;
  int id;
} pl_worker;

struct bcrt_pool {
  int n;                    /* threads, the caller's included */
  int nstarted;             /* workers running (n - 1 once created) */
  pthread_mutex_t run_lock; /* one job at a time */
  pthread_mutex_t m;        /* guards the sleeps below */
  pthread_cond_t wake, done;
  atomic_uint gen;          /* bumped per job (and to stop) */
  atomic_int pending;       /* workers still on the current job */
  atomic_int stop;
  bcrt_task_fn fn;          /* the current job, set before gen moves */
  void *arg;
  int ntasks;
  pl_worker *w;
  pthread_t *tid;
};

static void pl_tasks(struct bcrt_pool *p, int id) {
  for (int t = id; t < p->ntasks; t += p->n) p->fn(p->arg, t, p->ntasks);
}

static void *pl_main(void *arg) {
  pl_worker *me = (pl_worker *)arg;
  struct bcrt_pool *p = me->pool;
  unsigned seen = 0;
  for (;;) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
    for (int s = 0; g == seen && s < PL_SPIN; s++) {
      PL_PAUSE();
      g = atomic_load_explicit(&p->gen, memory_order_acquire);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->m);
      while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->wake, &p->m);
      pthread_mutex_unlock(&p->m);
    }
    seen = g;
    if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
    pl_tasks(p, me->id);
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->m);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->m);
    }
  }
}

/* Wakes every worker for the job (or the stop) just published. */
static void pl_publish(struct bcrt_pool *p) {
  pthread_mutex_lock(&p->m);
  atomic_fetch_add_explicit(&p->gen, 1u, memory_order_acq_rel);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->m);
}

static void pl_stop(struct bcrt_pool *p) {
  atomic_store_explicit(&p->stop, 1, memory_order_release);
  pl_publish(p);
  for (int i = 0; i < p->nstarted; i++) pthread_join(p->tid[i], NULL);
}

bcrt_pool *bcrt_pool_create(int nthreads) {
  if (nthreads < 1 || nthreads > BCRT_POOL_MAX_THREADS) return NULL;
  struct bcrt_pool *p = (struct bcrt_pool *)calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = nthreads;
  p->w = (pl_worker *)calloc((size_t)nthreads, sizeof *p->w);
  p->tid = (pthread_t *)calloc((size_t)nthreads, sizeof *p->tid);
  int ok = p->w && p->tid;
  int inits = 0;
  if (ok && pthread_mutex_init(&p->run_lock, NULL) == 0) inits |= 1;
  if (ok && pthread_mutex_init(&p->m, NULL) == 0) inits |= 2;
  if (ok && pthread_cond_init(&p->wake, NULL) == 0) inits |= 4;
  if (ok && pthread_cond_init(&p->done, NULL) == 0) inits |= 8;
  ok = ok && inits == 15;
  atomic_init(&p->gen, 0u);
  atomic_init(&p->pending, 0);
  atomic_init(&p->stop, 0);
  for (int i = 1; ok && i < nthreads; i++) {
    p->w[i - 1] = (pl_worker){.pool = p, .id = i};
    if (pthread_create(&p->tid[i - 1], NULL, pl_main, &p->w[i - 1]) != 0) ok = 0;
    else p->nstarted++;
  }
  if (ok) return p;
  if (inits == 15) pl_stop(p);
  if (inits & 1) pthread_mutex_destroy(&p->run_lock);
  if (inits & 2) pthread_mutex_destroy(&p->m);
  if (inits & 4) pthread_cond_destroy(&p->wake);
  if (inits & 8) pthread_cond_destroy(&p->done);
  free(p->w);
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
  free(p->w);
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
  atomic_store_explicit(&p->pending, p->n - 1, memory_order_release);
  pl_publish(p);
  pl_tasks(p, 0);
  for (int s = 0; atomic_load_explicit(&p->pending, memory_order_acquire) && s < PL_SPIN; s++)
    PL_PAUSE();
  if (atomic_load_explicit(&p->pending, memory_order_acquire)) {
    pthread_mutex_lock(&p->m);
    while (atomic_load_explicit(&p->pending, memory_order_acquire))
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
