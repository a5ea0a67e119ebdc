/* A small persistent thread pool for jitc kernels.
 *
 * Workers sleep on a condition variable between parallel sections; a section hands each
 * worker one contiguous chunk, the caller runs chunk 0, and the caller waits until every
 * chunk is done. Chunks are static so a kernel's result never depends on timing.
 */
#include "jitc_runtime.h"

#include <pthread.h>
#include <stdlib.h>

#define JITC_MAX_THREADS 256

static pthread_mutex_t section_lock = PTHREAD_MUTEX_INITIALIZER;  /* one section at a time */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t work_done = PTHREAD_COND_INITIALIZER;

static int64_t workers;            /* threads started */
static uint64_t generation;        /* bumped for every section */
static jitc_task current_task;
static void *current_frame;
static int64_t current_n, current_chunks, remaining;

static void chunk_bounds(int64_t chunk, int64_t *begin, int64_t *end) {
    *begin = current_n * chunk / current_chunks;
    *end = current_n * (chunk + 1) / current_chunks;
}

static void *worker_main(void *arg) {
    int64_t id = (int64_t)(intptr_t)arg; /* worker id i runs chunk i + 1 */
    uint64_t seen = 0;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (generation == seen)
            pthread_cond_wait(&work_ready, &lock);
        seen = generation;
        if (id + 1 >= current_chunks)
            continue;
        jitc_task task = current_task;
        void *frame = current_frame;
        int64_t begin, end;
        chunk_bounds(id + 1, &begin, &end);
        pthread_mutex_unlock(&lock);
        if (begin < end)
            task(frame, begin, end);
        pthread_mutex_lock(&lock);
        if (--remaining == 0)
            pthread_cond_signal(&work_done);
    }
    return NULL;
}

static void ensure_workers(int64_t wanted) {
    while (workers < wanted && workers < JITC_MAX_THREADS - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
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
    current_task = task;
    current_frame = frame;
    current_n = n;
    current_chunks = threads;
    remaining = threads - 1;
    generation++;
    pthread_cond_broadcast(&work_ready);
    int64_t begin, end;
    chunk_bounds(0, &begin, &end);
    pthread_mutex_unlock(&lock);
    task(frame, begin, end);
    pthread_mutex_lock(&lock);
    while (remaining > 0)
        pthread_cond_wait(&work_done, &lock);
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&section_lock);
}

int64_t jitc_pool_size(void) {
    pthread_mutex_lock(&lock);
    int64_t n = workers;
    pthread_mutex_unlock(&lock);
    return n;
}
