/* Kernel timings for `jitc.profile` (jitc/profiling.py).
 *
 * While a profile runs, a compiled function is called through a timed variant of its entry
 * (jitc/backends/cpu/codegen.py, `timing`): around each kernel, and around each chunk a pool
 * worker runs, it reads the clock (jitc_profile_now) and then appends one record
 * (jitc_profile_record). Code compiled without a profile calls neither.
 *
 * Each thread appends to a log of its own, so the hot side takes no lock: a log is a ring with
 * one writer (its thread) and one reader (jitc_profile_drain, which Python calls after each
 * timed call, under its own lock). A full log drops records and counts them. The logs are
 * linked in a list (under a mutex, taken when a thread writes its first record and by the
 * drain); a thread that exits marks its log orphaned, and the drain frees it once read.
 *
 * The extension exports these functions (no header: only jitc/profiling.py calls them, through
 * ctypes, and the timed entry, through symbols registered with LLVM).
 *
 * Times are CLOCK_MONOTONIC nanoseconds: Python's time.perf_counter_ns on Linux, so that the
 * records line up with the spans Python times. Thread ids are the kernel's (gettid), as
 * Python's threading.get_native_id, so a call's records fall on its thread's track and pool
 * workers get tracks of their own.
 */
#ifdef __linux__
#define _GNU_SOURCE  /* syscall */
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* One timed piece of work: a whole kernel (chunk == 0) or one chunk of a kernel split over
 * the thread pool (chunk == 1), covering outer indices [begin, end). `code` names the timed
 * executable (a number jitc/profiling.py handed out), `kernel` its kernel by position. */
typedef struct {
    int64_t code, kernel, chunk, begin, end, start_ns, end_ns, tid;
} jitc_profile_entry;

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t jitc_profile_now(void);

/* Append a record ending now, on the calling thread, to that thread's log. */
void jitc_profile_record(int64_t code, int64_t kernel, int64_t chunk, int64_t begin,
                         int64_t end, int64_t start_ns);

/* Move up to `capacity` records from every thread's log into `out`; returns how many. */
int64_t jitc_profile_drain(jitc_profile_entry *out, int64_t capacity);

/* Records lost because a thread's log was full (a drain came too late). */
int64_t jitc_profile_dropped(void);

#define LOG_RECORDS 4096

typedef struct thread_log {
    jitc_profile_entry records[LOG_RECORDS];
    _Atomic int64_t written;  /* records appended so far (the writer's) */
    _Atomic int64_t read;     /* records drained so far (the reader's) */
    _Atomic int orphaned;     /* its thread has exited */
    int64_t tid;
    struct thread_log *next;
} thread_log;

static pthread_mutex_t logs_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_log *logs;
static _Atomic int64_t dropped;
static pthread_key_t log_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local thread_log *own_log;

static void orphan(void *log) {
    atomic_store_explicit(&((thread_log *)log)->orphaned, 1, memory_order_release);
}

/* A forked child has only the forking thread, and the lock may be held by one that is gone:
 * it starts with no logs (the parent's stay with the parent). */
static void forget_logs_in_child(void) {
    pthread_mutex_init(&logs_lock, NULL);
    logs = NULL;
    own_log = NULL;
}

static void make_key(void) {
    pthread_key_create(&log_key, orphan);
    pthread_atfork(NULL, NULL, forget_logs_in_child);
}

static int64_t thread_id(void) {
#ifdef __linux__
    return (int64_t)syscall(SYS_gettid);
#else
    return (int64_t)(intptr_t)pthread_self();
#endif
}

static thread_log *this_threads_log(void) {
    if (own_log != NULL)
        return own_log;
    pthread_once(&key_once, make_key);
    thread_log *log = calloc(1, sizeof *log);
    if (log == NULL)
        return NULL;
    log->tid = thread_id();
    pthread_setspecific(log_key, log);
    pthread_mutex_lock(&logs_lock);
    log->next = logs;
    logs = log;
    pthread_mutex_unlock(&logs_lock);
    own_log = log;
    return log;
}

int64_t jitc_profile_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void jitc_profile_record(int64_t code, int64_t kernel, int64_t chunk, int64_t begin,
                         int64_t end, int64_t start_ns) {
    int64_t end_ns = jitc_profile_now();
    thread_log *log = this_threads_log();
    if (log == NULL) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return;
    }
    int64_t n = atomic_load_explicit(&log->written, memory_order_relaxed);
    if (n - atomic_load_explicit(&log->read, memory_order_acquire) >= LOG_RECORDS) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return;
    }
    jitc_profile_entry *r = &log->records[n % LOG_RECORDS];
    r->code = code;
    r->kernel = kernel;
    r->chunk = chunk;
    r->begin = begin;
    r->end = end;
    r->start_ns = start_ns;
    r->end_ns = end_ns;
    r->tid = log->tid;
    atomic_store_explicit(&log->written, n + 1, memory_order_release);
}

int64_t jitc_profile_drain(jitc_profile_entry *out, int64_t capacity) {
    int64_t count = 0;
    pthread_mutex_lock(&logs_lock);
    thread_log **link = &logs;
    while (*link != NULL) {
        thread_log *log = *link;
        int orphaned = atomic_load_explicit(&log->orphaned, memory_order_acquire);
        int64_t read = atomic_load_explicit(&log->read, memory_order_relaxed);
        int64_t written = atomic_load_explicit(&log->written, memory_order_acquire);
        while (read < written && count < capacity)
            out[count++] = log->records[read++ % LOG_RECORDS];
        atomic_store_explicit(&log->read, read, memory_order_release);
        if (orphaned && read == written) {
            *link = log->next;
            free(log);
        } else {
            link = &log->next;
        }
    }
    pthread_mutex_unlock(&logs_lock);
    return count;
}

int64_t jitc_profile_dropped(void) {
    return atomic_load_explicit(&dropped, memory_order_relaxed);
}
