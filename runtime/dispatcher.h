/* The Dispatcher's state, shared by dispatcher.c (checking arguments, allocating results,
 * calling the machine code) and bindings.c (a symbolic signature's bindings). */
#ifndef JITC_DISPATCHER_H
#define JITC_DISPATCHER_H

#include "pymodule.h"

#include <stdatomic.h>
#include <stdint.h>

typedef void (*entry_fn)(void **buffers);

typedef struct {
    int typenum;
    int ndim;
    npy_intp dims[NPY_MAXDIMS];
} ArraySpec;

/* A symbolic signature's argument dimensions that are not fixed are numbered key slots: a
   symbol standing alone takes one slot for all its occurrences (the first binds it, the others
   must equal it), any other expression (`n-1`) one slot of its own. The slots' values decide
   everything else of the call, so the Python binder, called once per key, computes for it:
   the symbol values (`int64_t dims[]`), the result shapes and the workspace size, or that
   these shapes are not this compilation's (a constraint fails: `miss`). */
#define BINDINGS 32
#define SYMBOLIC_DIM(d) ((d) < 0)
#define KEY_SLOT(d) (-1 - (d))

typedef struct {
    int used, miss, release_gil, large_results;
    size_t workspace_bytes;
    int64_t *key;       /* nkeys values */
    int64_t *dims;      /* nsymbols values */
    npy_intp *out_dims; /* NPY_MAXDIMS per result */
} Binding;

typedef struct {
    PyObject_HEAD
    entry_fn entry;
    Py_ssize_t nargs, nouts, nconsts;
    ArraySpec *args, *outs;
    void **consts;
    PyObject *const_refs;
    PyObject *owner;           /* keeps the machine code at `entry` alive */
    PyObject *name;            /* the compiled function's name, for error messages */
    size_t workspace_bytes;
    void *cached_workspace;
    atomic_int workspace_busy;
    int result_kind;
    int release_gil;
    Py_ssize_t *donated_from;  /* per result: the argument whose buffer it reuses, or -1 */
    Py_ssize_t *writes_to;     /* the last nwrites results: the argument each is copied into */
    Py_ssize_t nwrites;
    int large_results;         /* some result is allocated through the recycling handler */
    size_t workspace_capacity; /* bytes at cached_workspace (symbolic calls grow it) */
    /* A symbolic signature (binder non-NULL): */
    PyObject *binder;          /* binder(args) -> (dims, result shapes, workspace) or None */
    Py_ssize_t nkeys, nsymbols;
    int dims_last;             /* dims after the workspace pointer (cpu) or before it (c) */
    Py_ssize_t release_elements; /* release the GIL from this many elements touched */
    Binding *bindings;         /* BINDINGS of them, filled round robin */
    int next_binding, last_hit;
} Dispatcher;

/* A symbolic call's values, copied out of its binding (which a later binding may replace
   while this call runs). */
#define STACK_DIMS 64

typedef struct {
    size_t workspace_bytes;
    int release_gil, large_results;
    int64_t dims[STACK_DIMS];
    npy_intp out_dims[STACK_DIMS];  /* each result's extents, one after the other */
    int64_t *dims_heap;
    npy_intp *out_dims_heap;
} CallShape;

/* The bytes of an array of `spec`'s type and shape. */
size_t spec_bytes(const ArraySpec *spec);

/* bindings.c */
int init_symbolic(Dispatcher *self, PyObject *symbolic);
void free_bindings(Dispatcher *self);
/* 1: the arguments' shapes are this compilation's and `shape` holds their binding; 0: a
   miss; -1: an error. */
int bind_call(Dispatcher *self, PyObject *args, const int64_t *key, CallShape *shape);
void free_call_shape(CallShape *shape);

#endif
