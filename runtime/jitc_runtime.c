/* A small persistent thread pool for jitc kernels.
 *
 * A parallel section splits [0, n) into `chunks` fixed ranges. Chunk boundaries depend only on
 * n and the chunk count, so a kernel's result never depends on timing; which thread runs which
 * chunk does: the caller and the workers claim chunks from a shared ticket until none is left.
 * A worker that the OS has descheduled (another process on its core) therefore never holds a
 * section up: the caller runs the chunk itself.
 *
 * The ticket packs (phase << 16 | next chunk). A section moves the phase to an odd value
 * (nothing can be claimed), writes its fields, then to the next even value with chunk 0: a
 * claim is a compare-and-swap on the ticket a thread read before reading the fields, so it
 * fails if the fields changed in between.
 *
 * A jitc call runs its kernels back to back, a few microseconds apart, and waking a thread
 * that sleeps in the kernel costs about as much as a small kernel. So both sides spin briefly
 * (SPIN_NS) before sleeping: workers waiting for the next section, and the caller waiting for
 * chunks still running. The spin is short on purpose: a pool that kept spinning would steal
 * the core from whatever else the process runs between calls (numpy's BLAS threads, say).
 *
 * The pool serves one section at a time. A thread whose section finds it busy with another
 * thread's runs its own chunks itself, one after another, instead of waiting: several threads
 * calling jitc code at once (Dask's workers, a thread pool of requests) each keep their own
 * core busy rather than queue for the pool, or add its workers to theirs and oversubscribe.
 * The chunks are the same ones, so the results are too.
 */
#ifdef __linux__
#define _GNU_SOURCE  /* sched_getcpu, CPU_SET */
#include <sched.h>
#endif
#include "jitc_runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define JITC_MAX_THREADS 256
#define SPIN_NS 50000
#define CHUNK_BITS 16
#define CHUNK_MASK ((UINT64_C(1) << CHUNK_BITS) - 1)

static pthread_mutex_t section_lock = PTHREAD_MUTEX_INITIALIZER;  /* one section at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;

static int64_t workers;              /* threads started (changes under section_lock + lock) */
static int64_t sleepers;             /* workers blocked on work_ready (under lock) */
static _Atomic uint64_t ticket;      /* phase << CHUNK_BITS | next chunk to claim */
static _Atomic int64_t chunks_done;  /* chunks of the current section finished */
static atomic_int caller_sleeping;
static _Atomic(jitc_task) current_task;
static _Atomic(void *) current_frame;
static _Atomic int64_t current_n, current_chunks;
static _Atomic int64_t busy_sections;  /* sections run by their caller alone: the pool was busy */
static pthread_t worker_threads[JITC_MAX_THREADS];
static atomic_int worker_cpu[JITC_MAX_THREADS];  /* where each worker last ran (-1: unknown) */

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

static int current_cpu(void) {
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

static uint64_t phase_of(uint64_t t) { return t >> CHUNK_BITS; }

/* Claim and run chunks of the section published in `phase` until none is left. */
static void run_chunks(uint64_t phase) {
    for (;;) {
        uint64_t t = atomic_load_explicit(&ticket, memory_order_acquire);
        if (phase_of(t) != phase)
            return;
        int64_t chunk = (int64_t)(t & CHUNK_MASK);
        int64_t chunks = atomic_load_explicit(&current_chunks, memory_order_acquire);
        jitc_task task = atomic_load_explicit(&current_task, memory_order_acquire);
        void *frame = atomic_load_explicit(&current_frame, memory_order_acquire);
        int64_t n = atomic_load_explicit(&current_n, memory_order_acquire);
        if (chunk >= chunks)
            return;
        if (!atomic_compare_exchange_weak_explicit(&ticket, &t, t + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int64_t begin = n * chunk / chunks, end = n * (chunk + 1) / chunks;
        if (begin < end)
            task(frame, begin, end);
        atomic_fetch_add_explicit(&chunks_done, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&caller_sleeping, memory_order_seq_cst)) {
            pthread_mutex_lock(&lock);
            pthread_cond_signal(&work_done);
            pthread_mutex_unlock(&lock);
        }
    }
}

/* The phase of the next published section after `seen`: spins until SPIN_NS after the
 * current section is over (a worker that found every chunk taken must still be awake when the
 * caller, busy with the last ones, publishes the next section), then sleeps. */
static uint64_t next_section(uint64_t seen, int id) {
    int64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        uint64_t phase = phase_of(atomic_load_explicit(&ticket, memory_order_acquire));
        if (phase != seen && phase % 2 == 0)
            return phase;
        if ((i & 63) == 0) {
            atomic_store_explicit(&worker_cpu[id], current_cpu(), memory_order_relaxed);
            int64_t t = now_ns();
            int running = phase == seen &&
                atomic_load_explicit(&chunks_done, memory_order_relaxed) <
                    atomic_load_explicit(&current_chunks, memory_order_relaxed);
            if (deadline == 0 || running)
                deadline = t + SPIN_NS;
            else if (t > deadline)
                break;
        }
        relax();
    }
    pthread_mutex_lock(&lock);
    sleepers++;
    atomic_store_explicit(&worker_cpu[id], -1, memory_order_relaxed);  /* asleep: anywhere */
    uint64_t phase;
    while ((phase = phase_of(atomic_load_explicit(&ticket, memory_order_acquire))) == seen ||
           phase % 2 != 0)
        pthread_cond_wait(&work_ready, &lock);
    sleepers--;
    pthread_mutex_unlock(&lock);
    return phase;
}

/* A worker is sometimes queued on the caller's CPU while another CPU idles, and Linux can take
 * milliseconds to move it (seen in VMs): it then runs only when the caller blocks, and a
 * section takes as long as on one thread (or a scheduler tick longer, when the worker holds a
 * chunk). So the caller keeps its workers off its own CPU: a worker seen spinning there, and
 * every sleeping worker it is about to wake (it cannot know where the kernel will queue it),
 * gets an affinity without that CPU, which moves it at once; the worker restores its own
 * affinity as soon as it runs. */
#ifdef __linux__
static cpu_set_t saved_cpus[JITC_MAX_THREADS];  /* a narrowed worker's own affinity before */
static atomic_int narrowed[JITC_MAX_THREADS];
#endif

static void keep_off(int w, int cpu) {
#ifdef __linux__
    if (atomic_load_explicit(&narrowed[w], memory_order_acquire))
        return;  /* already kept off a CPU, not yet run since */
    cpu_set_t elsewhere;
    if (pthread_getaffinity_np(worker_threads[w], sizeof elsewhere, &elsewhere) != 0)
        return;
    saved_cpus[w] = elsewhere;
    CPU_CLR(cpu, &elsewhere);
    if (CPU_COUNT(&elsewhere) > 0 &&
        pthread_setaffinity_np(worker_threads[w], sizeof elsewhere, &elsewhere) == 0)
        atomic_store_explicit(&narrowed[w], 1, memory_order_release);
#else
    (void)w;
    (void)cpu;
#endif
}

static void restore_affinity(int id) {
#ifdef __linux__
    if (atomic_load_explicit(&narrowed[id], memory_order_acquire)) {
        sched_setaffinity(0, sizeof saved_cpus[id], &saved_cpus[id]);
        atomic_store_explicit(&narrowed[id], 0, memory_order_release);
    }
#else
    (void)id;
#endif
}

/* A forked child has none of the parent's threads, and its copies of the locks may be held by
 * threads that no longer exist: it starts an empty pool. */
static void reset_in_child(void) {
    pthread_mutex_init(&section_lock, NULL);
    pthread_mutex_init(&lock, NULL);
    pthread_cond_init(&work_ready, NULL);
    pthread_cond_init(&work_done, NULL);
    workers = 0;
    sleepers = 0;
    atomic_store_explicit(&ticket, 0, memory_order_relaxed);  /* new workers wait past phase 0 */
    atomic_store_explicit(&chunks_done, 0, memory_order_relaxed);
    atomic_store_explicit(&caller_sleeping, 0, memory_order_relaxed);
    for (int w = 0; w < JITC_MAX_THREADS; w++) {
        atomic_store_explicit(&worker_cpu[w], -1, memory_order_relaxed);
#ifdef __linux__
        atomic_store_explicit(&narrowed[w], 0, memory_order_relaxed);
#endif
    }
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void register_fork_handler(void) {
    pthread_atfork(NULL, NULL, reset_in_child);
}

static void *worker_main(void *arg) {
    int id = (int)(intptr_t)arg;
    uint64_t seen = 0;
    for (;;) {
        seen = next_section(seen, id);
        restore_affinity(id);
        atomic_store_explicit(&worker_cpu[id], current_cpu(), memory_order_relaxed);
        run_chunks(seen);
    }
    return NULL;
}

static void ensure_workers(int64_t wanted) {
    while (workers < wanted && workers < JITC_MAX_THREADS - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_store_explicit(&worker_cpu[workers], -1, memory_order_relaxed);
        int failed = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)workers);
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        worker_threads[workers] = thread;
        workers++;
    }
}

void jitc_parallel_for(jitc_task task, void *frame, int64_t n, int64_t threads) {
    if (threads > n)
        threads = n;
    if (threads > (int64_t)CHUNK_MASK)
        threads = (int64_t)CHUNK_MASK;
    if (threads <= 1) {
        if (n > 0)
            task(frame, 0, n);
        return;
    }
    pthread_once(&fork_handler_once, register_fork_handler);
    if (pthread_mutex_trylock(&section_lock) != 0) {
        atomic_fetch_add_explicit(&busy_sections, 1, memory_order_relaxed);
        for (int64_t chunk = 0; chunk < threads; chunk++) {
            int64_t begin = n * chunk / threads, end = n * (chunk + 1) / threads;
            if (begin < end)
                task(frame, begin, end);
        }
        return;
    }
    pthread_mutex_lock(&lock);
    ensure_workers(threads - 1);
    if (threads > workers + 1)
        threads = workers + 1;
    pthread_mutex_unlock(&lock);
    /* Every chunk of the previous section is done, so nobody is inside its fields; a late
     * worker may still read them, but its claim fails once the phase moves. */
    uint64_t phase = phase_of(atomic_load_explicit(&ticket, memory_order_relaxed)) + 1;
    atomic_store_explicit(&ticket, phase << CHUNK_BITS | CHUNK_MASK, memory_order_seq_cst);
    /* Release stores: a worker that reads any of these new values is then sure to see the
     * odd phase above, so its claim on the old section fails. */
    atomic_store_explicit(&current_task, task, memory_order_release);
    atomic_store_explicit(&current_frame, frame, memory_order_release);
    atomic_store_explicit(&current_n, n, memory_order_release);
    atomic_store_explicit(&current_chunks, threads, memory_order_release);
    atomic_store_explicit(&chunks_done, 0, memory_order_relaxed);
    int here = current_cpu();
    for (int64_t w = 0; here >= 0 && w < threads - 1; w++) {
        int at = atomic_load_explicit(&worker_cpu[w], memory_order_relaxed);
        if (at == here || at < 0)  /* spinning on this CPU, or asleep */
            keep_off((int)w, here);
    }
    atomic_store_explicit(&ticket, (phase + 1) << CHUNK_BITS, memory_order_release);
    pthread_mutex_lock(&lock);
    if (sleepers > 0)
        pthread_cond_broadcast(&work_ready);
    pthread_mutex_unlock(&lock);
    run_chunks(phase + 1);
    int64_t deadline = 0;
    for (unsigned i = 0; atomic_load_explicit(&chunks_done, memory_order_acquire) < threads;
         i++) {
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (deadline == 0) {
                deadline = t + SPIN_NS;
            } else if (t > deadline) {
                pthread_mutex_lock(&lock);
                atomic_store_explicit(&caller_sleeping, 1, memory_order_seq_cst);
                while (atomic_load_explicit(&chunks_done, memory_order_seq_cst) < threads)
                    pthread_cond_wait(&work_done, &lock);
                atomic_store_explicit(&caller_sleeping, 0, memory_order_relaxed);
                pthread_mutex_unlock(&lock);
                break;
            }
        }
        relax();
    }
    pthread_mutex_unlock(&section_lock);
}

int64_t jitc_pool_busy_sections(void) {
    return atomic_load_explicit(&busy_sections, memory_order_relaxed);
}

int64_t jitc_pool_size(void) {
    pthread_mutex_lock(&lock);
    int64_t n = workers;
    pthread_mutex_unlock(&lock);
    return n;
}
