/* jitc._runtime: result memory that is recycled (see below). */
#include "pymodule.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* Result memory that is recycled.
 *
 * A fresh multi-megabyte result costs a page fault per page on first touch (the kernel zeroes
 * every page), about as much as computing it: JAX spends most of a 16M-element GELU faulting
 * its output in. Large results are therefore allocated through a numpy memory handler whose
 * free() keeps up to RECYCLE_SLOTS blocks (RECYCLE_LIMIT bytes in all, JITC_RESULT_CACHE_MB to
 * change) for the next result of the same size, so a function called in a loop writes into
 * memory that is already mapped. The arrays still own their data (resize, pickling and
 * np.shares_memory behave as for any numpy array); the block's size sits in a 64-byte header.
 */
#define RECYCLE_SLOTS 8
#define HUGE_BYTES ((size_t)2 << 20)
#define HEADER ALIGNMENT

typedef struct {
    char *data;
    size_t bytes;
} RecycledBlock;

static RecycledBlock recycled[RECYCLE_SLOTS];
static size_t recycled_bytes;
size_t recycle_limit = (size_t)256 << 20;
static pthread_mutex_t recycle_lock = PTHREAD_MUTEX_INITIALIZER;

static void *fresh_block(size_t bytes) {
    size_t total = bytes + HEADER;
    void *base = NULL;
    if (total < bytes || posix_memalign(&base, total >= 2 * HUGE_BYTES ? HUGE_BYTES : ALIGNMENT,
                                        total) != 0)
        return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (total >= 2 * HUGE_BYTES)
        madvise(base, total, MADV_HUGEPAGE);
#endif
    *(size_t *)base = bytes;
    return (char *)base + HEADER;
}

static void *result_malloc(void *ctx, size_t bytes) {
    (void)ctx;
    pthread_mutex_lock(&recycle_lock);
    for (int i = 0; i < RECYCLE_SLOTS; i++) {
        if (recycled[i].data && recycled[i].bytes == bytes) {
            char *data = recycled[i].data;
            recycled[i].data = NULL;
            recycled_bytes -= bytes;
            pthread_mutex_unlock(&recycle_lock);
            return data;
        }
    }
    pthread_mutex_unlock(&recycle_lock);
    return fresh_block(bytes);
}

static void result_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size;  /* the header is authoritative */
    if (!ptr) return;
    size_t bytes = *(size_t *)((char *)ptr - HEADER);
    pthread_mutex_lock(&recycle_lock);
    if (bytes >= RECYCLE_MIN_BYTES && recycled_bytes + bytes <= recycle_limit) {
        for (int i = 0; i < RECYCLE_SLOTS; i++) {
            if (!recycled[i].data) {
                recycled[i].data = ptr;
                recycled[i].bytes = bytes;
                recycled_bytes += bytes;
                pthread_mutex_unlock(&recycle_lock);
                return;
            }
        }
    }
    pthread_mutex_unlock(&recycle_lock);
    free((char *)ptr - HEADER);
}

static void *result_calloc(void *ctx, size_t count, size_t size) {
    if (size && count > (size_t)-1 / size) return NULL;
    void *data = result_malloc(ctx, count * size);
    if (data) memset(data, 0, count * size);
    return data;
}

static void *result_realloc(void *ctx, void *ptr, size_t bytes) {
    if (!ptr) return result_malloc(ctx, bytes);
    size_t old = *(size_t *)((char *)ptr - HEADER);
    void *data = result_malloc(ctx, bytes);
    if (!data) return NULL;
    memcpy(data, ptr, old < bytes ? old : bytes);
    result_free(ctx, ptr, old);
    return data;
}

static PyDataMem_Handler result_handler = {
    "jitc_recycled_results", 1,
    {NULL, result_malloc, result_calloc, result_realloc, result_free},
};
PyObject *result_handler_capsule;

PyObject *release_recycled(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    pthread_mutex_lock(&recycle_lock);
    for (int i = 0; i < RECYCLE_SLOTS; i++) {
        if (recycled[i].data) free(recycled[i].data - HEADER);
        recycled[i].data = NULL;
    }
    recycled_bytes = 0;
    pthread_mutex_unlock(&recycle_lock);
    Py_RETURN_NONE;
}

/* The handler's capsule, and the limit from JITC_RESULT_CACHE_MB; -1 on an error. */
int init_recycled_results(void) {
    const char *limit = getenv("JITC_RESULT_CACHE_MB");
    if (limit && *limit) recycle_limit = (size_t)strtoull(limit, NULL, 10) << 20;
    result_handler_capsule = PyCapsule_New(&result_handler, "mem_handler", NULL);
    return result_handler_capsule ? 0 : -1;
}
