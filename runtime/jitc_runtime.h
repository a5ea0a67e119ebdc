/* The C runtime shared by jitc's JIT-compiled code and its ahead-of-time libraries. */
#ifndef JITC_RUNTIME_H
#define JITC_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel computes the part of its output whose outermost index is in [begin, end). */
typedef void (*jitc_task)(void *frame, int64_t begin, int64_t end);

/* Run task over [0, n) split into `threads` contiguous chunks and return when all are done.
 * The chunk boundaries depend only on n and `threads`; the calling thread and the pool's
 * workers claim chunks until none is left. Safe to call from several threads at once (a
 * caller that finds the pool busy with another's section runs its chunks alone, in order), and
 * in a child after fork (it starts a new pool). */
void jitc_parallel_for(jitc_task task, void *frame, int64_t n, int64_t threads);

/* Number of sections whose caller ran them alone because the pool was busy. */
int64_t jitc_pool_busy_sections(void);

/* Number of worker threads started so far (the pool grows on demand, never shrinks). */
int64_t jitc_pool_size(void);

#ifdef __cplusplus
}
#endif

#endif
