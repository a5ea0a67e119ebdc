/* A small persistent thread pool for jitc kernels.
 *
 * A parallel section hands each worker one contiguous chunk, the caller runs chunk 0 and
 * returns when every chunk is done. Chunks are static, so a kernel's result never depends on
 * timing.
 *
 * A jitc call runs its kernels back to back, a few microseconds apart, and waking a thread
 * that sleeps in the kernel costs about as much as a small kernel. So both sides spin briefly
 * (SPIN_NS) before sleeping: workers waiting for the next section, and the caller waiting for
 * the workers. The spin is short on purpose: a pool that kept spinning would steal the core
 * from whatever else the process runs between calls (numpy's BLAS threads, say).
 */
#include "jitc_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define JITC_MAX_THREADS 256
#define SPIN_NS 50000

static pthread_mutex_t section_lock = PTHREAD_MUTEX_INITIALIZER;  /* one section at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;

static int64_t workers;              /* threads started (changes under section_lock + lock) */
static int64_t sleepers;             /* workers blocked on work_ready (under lock) */
static _Atomic uint64_t generation;  /* bumped (release) once a section's fields are set */
static _Atomic int64_t remaining;    /* worker chunks of the current section not yet done */
static uint64_t joined_after[JITC_MAX_THREADS];  /* generation current when a worker started */
static jitc_task current_task;
static void *current_frame;
static int64_t current_n, current_chunks;

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spin until *value differs from `old` or SPIN_NS pass; returns the last value read. */
static uint64_t spin_while_equal(_Atomic uint64_t *value, uint64_t old) {
    int64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        uint64_t v = atomic_load_explicit(value, memory_order_acquire);
        if (v != old)
            return v;
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (deadline == 0)
                deadline = t + SPIN_NS;
            else if (t > deadline)
                return v;
        }
        relax();
    }
}

static void chunk_bounds(int64_t chunk, int64_t *begin, int64_t *end) {
    *begin = current_n * chunk / current_chunks;
    *end = current_n * (chunk + 1) / current_chunks;
}

static void *worker_main(void *arg) {
    int64_t id = (int64_t)(intptr_t)arg; /* worker id i runs chunk i + 1 */
    uint64_t seen = joined_after[id];
    for (;;) {
        uint64_t now = spin_while_equal(&generation, seen);
        if (now == seen) {
            pthread_mutex_lock(&lock);
            sleepers++;
            while ((now = atomic_load_explicit(&generation, memory_order_acquire)) == seen)
                pthread_cond_wait(&work_ready, &lock);
            sleepers--;
            pthread_mutex_unlock(&lock);
        }
        seen = now;
        /* Every worker checks in once per section, with or without a chunk, so the caller
         * cannot publish the next section while a worker still reads this one's fields. */
        if (id + 1 < current_chunks) {
            int64_t begin, end;
            chunk_bounds(id + 1, &begin, &end);
            if (begin < end)
                current_task(current_frame, begin, end);
        }
        if (atomic_fetch_sub_explicit(&remaining, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&lock);
            pthread_cond_signal(&work_done);
            pthread_mutex_unlock(&lock);
        }
    }
    return NULL;
}

static void ensure_workers(int64_t wanted) {
    while (workers < wanted && workers < JITC_MAX_THREADS - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* Runs under section_lock, so no section is published until the worker is counted;
         * it joins the next one even if it starts running only after that is published. */
        joined_after[workers] = atomic_load_explicit(&generation, memory_order_relaxed);
        if (pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)workers) != 0) {
            pthread_attr_destroy(&attr);
            break;
        }
        pthread_attr_destroy(&attr);
        workers++;
    }
}

void jitc_parallel_for(jitc_task task, void *frame, int64_t n, int64_t threads) {
    if (threads > n)
        threads = n;
    if (threads <= 1) {
        if (n > 0)
            task(frame, 0, n);
        return;
    }
    pthread_mutex_lock(&section_lock);
    pthread_mutex_lock(&lock);
    ensure_workers(threads - 1);
    if (threads > workers + 1)
        threads = workers + 1;
    pthread_mutex_unlock(&lock);
    current_task = task;
    current_frame = frame;
    current_n = n;
    current_chunks = threads;
    atomic_store_explicit(&remaining, workers, memory_order_relaxed);
    atomic_fetch_add_explicit(&generation, 1, memory_order_release);
    pthread_mutex_lock(&lock);
    if (sleepers > 0)
        pthread_cond_broadcast(&work_ready);
    pthread_mutex_unlock(&lock);
    int64_t begin, end;
    chunk_bounds(0, &begin, &end);
    task(frame, begin, end);
    int64_t deadline = 0;
    for (unsigned i = 0; atomic_load_explicit(&remaining, memory_order_acquire) > 0; i++) {
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (deadline == 0) {
                deadline = t + SPIN_NS;
            } else if (t > deadline) {
                pthread_mutex_lock(&lock);
                while (atomic_load_explicit(&remaining, memory_order_acquire) > 0)
                    pthread_cond_wait(&work_done, &lock);
                pthread_mutex_unlock(&lock);
                break;
            }
        }
        relax();
    }
    pthread_mutex_unlock(&section_lock);
}

int64_t jitc_pool_size(void) {
    pthread_mutex_lock(&lock);
    int64_t n = workers;
    pthread_mutex_unlock(&lock);
    return n;
}
