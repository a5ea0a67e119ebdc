/* jitc._runtime's Dispatcher: the fast path from Python into a compiled function. It checks
 * the arguments against the one signature it was built for, allocates the results, and calls
 * the machine code, with no Python-level work in between. A signature may have symbolic
 * dimensions (docs/dynamic-shapes.md): the call binds them from the argument shapes and looks
 * the binding up in a small table that Python fills (see `Binding`).
 */
#include "pymodule.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher.h"

size_t spec_bytes(const ArraySpec *spec) {
    PyArray_Descr *descr = PyArray_DescrFromType(spec->typenum);
    if (!descr) return 0;
    size_t bytes = (size_t)PyDataType_ELSIZE(descr);
    Py_DECREF(descr);
    for (int d = 0; d < spec->ndim; d++) bytes *= (size_t)spec->dims[d];
    return bytes;
}

static int read_specs(PyObject *seq, ArraySpec **out, Py_ssize_t *count) {
    PyObject *fast = PySequence_Fast(seq, "specs must be a sequence");
    if (!fast) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    *out = calloc(n ? n : 1, sizeof(ArraySpec));
    *count = n;
    if (!*out) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        PyObject *shape;
        int typenum;
        if (!PyArg_ParseTuple(item, "iO", &typenum, &shape)) goto fail;
        PyObject *dims = PySequence_Fast(shape, "shape must be a sequence");
        if (!dims) goto fail;
        Py_ssize_t ndim = PySequence_Fast_GET_SIZE(dims);
        if (ndim > NPY_MAXDIMS) {
            Py_DECREF(dims);
            PyErr_SetString(PyExc_ValueError, "too many dimensions");
            goto fail;
        }
        (*out)[i].typenum = typenum;
        (*out)[i].ndim = (int)ndim;
        for (Py_ssize_t d = 0; d < ndim; d++)
            (*out)[i].dims[d] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(dims, d));
        Py_DECREF(dims);
    }
    Py_DECREF(fast);
    return PyErr_Occurred() ? -1 : 0;
fail:
    Py_DECREF(fast);
    return -1;
}

static int Dispatcher_init(Dispatcher *self, PyObject *args, PyObject *kwds) {
    unsigned long long address;
    PyObject *arg_specs, *out_specs, *constants;
    Py_ssize_t workspace;
    int result_kind, release_gil;
    PyObject *donations = NULL, *owner = NULL, *name = NULL, *writes = NULL, *symbolic = NULL;
    if (!PyArg_ParseTuple(args, "KOOOnii|OOUOO", &address, &arg_specs, &out_specs, &constants,
                          &workspace, &result_kind, &release_gil, &donations, &owner, &name,
                          &writes, &symbolic))
        return -1;
    if (!name) name = PyUnicode_FromString("the jitted function");
    else Py_INCREF(name);
    if (!name) return -1;
    Py_XSETREF(self->name, name);
    /* The machine code at `address` lives as long as its owner: holding it here lets a call
       already running finish after the owner's last other reference is dropped. */
    Py_XINCREF(owner);
    Py_XSETREF(self->owner, owner);
    self->entry = (entry_fn)(uintptr_t)address;
    if (read_specs(arg_specs, &self->args, &self->nargs) < 0) return -1;
    if (read_specs(out_specs, &self->outs, &self->nouts) < 0) return -1;
    if (symbolic && symbolic != Py_None && init_symbolic(self, symbolic) < 0) return -1;
    PyObject *fast = PySequence_Fast(constants, "constants must be a sequence");
    if (!fast) return -1;
    self->nconsts = PySequence_Fast_GET_SIZE(fast);
    self->consts = calloc(self->nconsts ? self->nconsts : 1, sizeof(void *));
    for (Py_ssize_t i = 0; i < self->nconsts; i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyArray_Check(c) || !PyArray_ISCARRAY_RO((PyArrayObject *)c)) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "constants must be C-contiguous arrays");
            return -1;
        }
        self->consts[i] = PyArray_DATA((PyArrayObject *)c);
    }
    self->const_refs = PySequence_Tuple(fast);
    Py_DECREF(fast);
    self->donated_from = malloc((self->nouts ? self->nouts : 1) * sizeof(Py_ssize_t));
    if (!self->donated_from) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->nouts; i++) self->donated_from[i] = -1;
    if (donations && donations != Py_None) {
        PyObject *items = PySequence_Fast(donations, "donations must be a sequence");
        if (!items) return -1;
        for (Py_ssize_t i = 0; i < self->nouts && i < PySequence_Fast_GET_SIZE(items); i++)
            self->donated_from[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(items, i));
        Py_DECREF(items);
        if (PyErr_Occurred()) return -1;
        for (Py_ssize_t i = 0; i < self->nouts; i++) {
            if (self->donated_from[i] >= self->nargs) {
                PyErr_SetString(PyExc_ValueError, "a donation names no argument");
                return -1;
            }
        }
    }
    if (writes && writes != Py_None) {
        PyObject *items = PySequence_Fast(writes, "writes must be a sequence");
        if (!items) return -1;
        self->nwrites = PySequence_Fast_GET_SIZE(items);
        self->writes_to = malloc((self->nwrites ? self->nwrites : 1) * sizeof(Py_ssize_t));
        if (!self->writes_to) {
            Py_DECREF(items);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < self->nwrites; i++)
            self->writes_to[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(items, i));
        Py_DECREF(items);
        if (PyErr_Occurred()) return -1;
        for (Py_ssize_t i = 0; i < self->nwrites; i++) {
            Py_ssize_t out = self->nouts - self->nwrites + i;
            /* A symbolic signature's sizes are compared per binding (fill_binding). */
            /* A write-back may be computed in its own argument's buffer (donated to it). */
            if (self->writes_to[i] < 0 || self->writes_to[i] >= self->nargs || out < 0 ||
                (self->donated_from[out] >= 0 &&
                 self->donated_from[out] != self->writes_to[i]) ||
                (!self->binder && spec_bytes(&self->outs[out]) !=
                                      spec_bytes(&self->args[self->writes_to[i]]))) {
                PyErr_SetString(PyExc_ValueError, "a write-back names no argument of its size");
                return -1;
            }
        }
    }
    for (Py_ssize_t i = 0; i < self->nouts && !self->binder; i++)
        if (self->donated_from[i] < 0 && spec_bytes(&self->outs[i]) >= RECYCLE_MIN_BYTES)
            self->large_results = 1;
    self->workspace_bytes = (size_t)workspace;
    self->result_kind = result_kind;
    self->release_gil = release_gil;
    atomic_init(&self->workspace_busy, 0);
    return 0;
}

/* The binder (a Python method) may hold what holds this dispatcher. */
static int Dispatcher_traverse(Dispatcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->binder);
    Py_VISIT(self->owner);
    Py_VISIT(self->const_refs);
    return 0;
}

static int Dispatcher_clear(Dispatcher *self) {
    Py_CLEAR(self->binder);
    return 0;
}

static void Dispatcher_dealloc(Dispatcher *self) {
    PyObject_GC_UnTrack(self);
    free(self->args);
    free(self->outs);
    free(self->consts);
    free(self->donated_from);
    free(self->writes_to);
    free(self->cached_workspace);
    free_bindings(self);
    Py_XDECREF(self->binder);
    Py_XDECREF(self->const_refs);
    Py_XDECREF(self->owner);
    Py_XDECREF(self->name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether `obj` is an array this signature takes as it is. A symbolic dimension's extent goes
   to its key slot (`key[slot]` is -1 until bound), or must equal the value bound there. */
static int matches(PyObject *obj, const ArraySpec *spec, int64_t *key) {
    /* Subclasses (masked arrays, np.matrix, memmaps) take the general path, which refuses
       those whose operations differ from a plain array's. */
    if (!PyArray_CheckExact(obj)) return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_NDIM(a) != spec->ndim) return 0;
    if (PyArray_TYPE(a) != spec->typenum &&
        !PyArray_EquivTypenums(PyArray_TYPE(a), spec->typenum))
        return 0;
    if (!PyArray_ISCARRAY_RO(a)) return 0;
    npy_intp *dims = PyArray_DIMS(a);
    for (int d = 0; d < spec->ndim; d++) {
        npy_intp want = spec->dims[d];
        if (key && SYMBOLIC_DIM(want)) {
            int64_t *slot = &key[KEY_SLOT(want)];
            if (*slot < 0)
                *slot = dims[d];
            else if (*slot != dims[d])
                return 0;
        } else if (dims[d] != want) {
            return 0;
        }
    }
    return 1;
}

/* Whether two C-contiguous arrays' bytes overlap. */
static int overlaps(PyArrayObject *a, PyArrayObject *b) {
    const char *a0 = PyArray_BYTES(a), *b0 = PyArray_BYTES(b);
    npy_intp a_bytes = PyArray_NBYTES(a), b_bytes = PyArray_NBYTES(b);
    return a_bytes && b_bytes && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

/* `bytes` of workspace: the dispatcher's own block when no other call holds it (grown when a
   symbolic call needs more), else a fresh one for this call (`*cached` is 0: free it). */
static void *take_workspace(Dispatcher *self, size_t bytes, int *cached) {
    int expected = 0;
    *cached = 0;
    if (bytes == 0) return NULL;
    if (atomic_compare_exchange_strong(&self->workspace_busy, &expected, 1)) {
        if (self->cached_workspace && self->workspace_capacity < bytes) {
            free(self->cached_workspace);
            self->cached_workspace = NULL;
        }
        if (!self->cached_workspace) {
            if (posix_memalign(&self->cached_workspace, ALIGNMENT, bytes) == 0)
                self->workspace_capacity = bytes;
            else
                self->cached_workspace = NULL;
        }
        if (self->cached_workspace) {
            *cached = 1;
            return self->cached_workspace;
        }
        atomic_store(&self->workspace_busy, 0);
    }
    void *fresh = NULL;
    if (posix_memalign(&fresh, ALIGNMENT, bytes) != 0) return NULL;
    return fresh;
}

static PyObject *memory_error(Dispatcher *self, size_t bytes) {
    /* PyErr_Format has no %f: GiB to one decimal, in integers. */
    size_t tenths = (bytes / ((size_t)1 << 20) * 10 + 512) / 1024;
    return PyErr_Format(PyExc_MemoryError,
                        "%U: cannot allocate the %zu.%zu GiB (%zu bytes) its compiled code needs "
                        "for temporaries "
                        "(see jitted.lower(...).compile().memory_analysis()); process the data in "
                        "smaller pieces, or restructure the computation so that no intermediate "
                        "that large is stored (a reduction of a broadcast product, (a[:, None] * "
                        "b).sum(0), is fused and never stored)",
                        self->name, tenths / 10, tenths % 10, bytes);
}

static PyObject *execute(Dispatcher *self, PyObject *args, const CallShape *shape);

/* The call with exactly these arguments: its result, or None when they are not of the
   signature this dispatcher was built for (the caller then takes the general path). `key`:
   a symbolic signature's key slots, all -1 (NULL for an exact signature). */
static PyObject *run_call(Dispatcher *self, PyObject *args, int64_t *key) {
    if (PyTuple_GET_SIZE(args) != self->nargs) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < self->nargs; i++)
        if (!matches(PyTuple_GET_ITEM(args, i), &self->args[i], key)) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < self->nouts; i++) {
        Py_ssize_t from = self->donated_from[i];
        if (from < 0) continue;
        PyArrayObject *donated = (PyArrayObject *)PyTuple_GET_ITEM(args, from);
        if (!PyArray_ISWRITEABLE(donated)) Py_RETURN_NONE;  /* it must be writable */
        /* Writing a donated buffer that another argument also reads (`f(a, a)`, `f(a, a[1:])`)
           would clobber elements still to be read: the caller copies it first. */
        for (Py_ssize_t j = 0; j < self->nargs; j++)
            if (j != from && overlaps(donated, (PyArrayObject *)PyTuple_GET_ITEM(args, j)))
                Py_RETURN_NONE;
    }
    /* An argument the function writes is updated after the call, from its own result: it
       must be writable, and no other argument may see it change (the caller then raises). */
    for (Py_ssize_t w = 0; w < self->nwrites; w++) {
        PyArrayObject *target = (PyArrayObject *)PyTuple_GET_ITEM(args, self->writes_to[w]);
        if (!PyArray_ISWRITEABLE(target)) Py_RETURN_NONE;
        for (Py_ssize_t j = 0; j < self->nargs; j++)
            if (j != self->writes_to[w] &&
                overlaps(target, (PyArrayObject *)PyTuple_GET_ITEM(args, j)))
                Py_RETURN_NONE;
    }
    if (key) {
        CallShape shape;  /* its arrays are filled by bind_call */
        shape.dims_heap = NULL;
        shape.out_dims_heap = NULL;
        int bound = bind_call(self, args, key, &shape);
        PyObject *result = bound < 0 ? NULL
            : bound == 0 ? Py_NewRef(Py_None)
            : execute(self, args, &shape);
        free_call_shape(&shape);
        return result;
    }
    return execute(self, args, NULL);
}

/* Allocate the results, run the code and return the results as `result_kind` says; `shape`:
   a symbolic call's binding (NULL: the exact signature's). */
static PyObject *execute(Dispatcher *self, PyObject *args, const CallShape *shape) {
    size_t workspace_bytes = shape ? shape->workspace_bytes : self->workspace_bytes;
    int release_gil = shape ? shape->release_gil : self->release_gil;
    int large_results = shape ? shape->large_results : self->large_results;
    const npy_intp *out_dims = NULL;
    if (shape) out_dims = shape->out_dims_heap ? shape->out_dims_heap : shape->out_dims;
    /* A symbolic call passes a pointer to its symbol values too: after the workspace's
       pointer (cpu) or before it (c). */
    Py_ssize_t total = self->nargs + self->nouts + self->nconsts + 1 + (shape != NULL);
    void *stack_buffers[STACK_BUFFERS];
    void **buffers = total <= STACK_BUFFERS ? stack_buffers : malloc(total * sizeof(void *));
    if (!buffers) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < self->nargs; i++)
        buffers[i] = PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(args, i));
    PyObject *results = PyTuple_New(self->nouts);
    if (!results) goto fail;
    PyObject *previous_handler = NULL;
    if (large_results && recycle_limit) {
        previous_handler = PyDataMem_SetHandler(result_handler_capsule);
        if (!previous_handler) goto fail;
    }
    for (Py_ssize_t i = 0; i < self->nouts; i++) {
        ArraySpec *spec = &self->outs[i];
        Py_ssize_t from = self->donated_from[i];
        if (from >= 0) {
            /* The result is computed in place in the donated argument, which is returned. */
            PyObject *donated = PyTuple_GET_ITEM(args, from);
            Py_INCREF(donated);
            PyTuple_SET_ITEM(results, i, donated);
            buffers[self->nargs + i] = PyArray_DATA((PyArrayObject *)donated);
            continue;
        }
        PyObject *out = PyArray_SimpleNew(spec->ndim, out_dims ? (npy_intp *)out_dims : spec->dims,
                                          spec->typenum);
        if (out_dims) out_dims += spec->ndim;
        if (!out) break;
        PyTuple_SET_ITEM(results, i, out);
        buffers[self->nargs + i] = PyArray_DATA((PyArrayObject *)out);
    }
    if (previous_handler) {
        PyObject *ours = PyDataMem_SetHandler(previous_handler);
        Py_DECREF(previous_handler);
        if (!ours) goto fail;
        Py_DECREF(ours);
    }
    for (Py_ssize_t i = 0; i < self->nouts; i++)
        if (!PyTuple_GET_ITEM(results, i)) goto fail;
    memcpy(buffers + self->nargs + self->nouts, self->consts, self->nconsts * sizeof(void *));
    int cached;
    void *workspace = take_workspace(self, workspace_bytes, &cached);
    if (workspace_bytes && !workspace) {
        memory_error(self, workspace_bytes);
        goto fail;
    }
    if (!shape) {
        buffers[total - 1] = workspace;
    } else {
        void *dims = shape->dims_heap ? (void *)shape->dims_heap : (void *)shape->dims;
        buffers[total - 1] = self->dims_last ? dims : workspace;
        buffers[total - 2] = self->dims_last ? workspace : dims;
    }
    if (release_gil) {
        Py_BEGIN_ALLOW_THREADS
        self->entry(buffers);
        Py_END_ALLOW_THREADS
    } else {
        self->entry(buffers);
    }
    if (cached)
        atomic_store(&self->workspace_busy, 0);
    else
        free(workspace);
    if (buffers != stack_buffers) free(buffers);
    if (self->nwrites) {
        Py_ssize_t returned = self->nouts - self->nwrites;
        for (Py_ssize_t w = 0; w < self->nwrites; w++) {
            if (self->donated_from[returned + w] >= 0) continue;  /* written in place */
            PyArrayObject *value = (PyArrayObject *)PyTuple_GET_ITEM(results, returned + w);
            PyArrayObject *target =
                (PyArrayObject *)PyTuple_GET_ITEM(args, self->writes_to[w]);
            memcpy(PyArray_DATA(target), PyArray_DATA(value), PyArray_NBYTES(value));
        }
        PyObject *kept = PyTuple_GetSlice(results, 0, returned);
        Py_DECREF(results);
        if (!kept) return NULL;
        results = kept;
    }
    if (self->result_kind == RESULT_NONE) {
        Py_DECREF(results);
        Py_INCREF(no_result);
        return no_result;
    }
    if (self->result_kind == RESULT_SINGLE) {
        PyObject *only = PyTuple_GET_ITEM(results, 0);
        Py_INCREF(only);
        Py_DECREF(results);
        return only;
    }
    if (self->result_kind == RESULT_LIST) {
        PyObject *list = PySequence_List(results);
        Py_DECREF(results);
        return list;
    }
    return results;
fail:
    Py_XDECREF(results);
    if (buffers != stack_buffers) free(buffers);
    return NULL;
}

#define STACK_KEYS 64

PyObject *dispatch_args(PyObject *dispatcher, PyObject *args) {
    Dispatcher *self = (Dispatcher *)dispatcher;
    if (!self->binder) return run_call(self, args, NULL);
    int64_t stack_key[STACK_KEYS];
    int64_t *key = self->nkeys <= STACK_KEYS ? stack_key
                                             : PyMem_Malloc(self->nkeys * sizeof(int64_t));
    if (!key) return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < self->nkeys; k++) key[k] = -1;
    PyObject *result = run_call(self, args, key);
    if (key != stack_key) PyMem_Free(key);
    return result;
}

/* `dispatcher(x, y)` or `dispatcher((x, y))` (a fast path's calling convention). */
static PyObject *Dispatcher_call(Dispatcher *self, PyObject *call_args, PyObject *kwds) {
    if (kwds && PyDict_GET_SIZE(kwds)) Py_RETURN_NONE;
    PyObject *args = call_args;
    if (PyTuple_GET_SIZE(call_args) == 1 && PyTuple_Check(PyTuple_GET_ITEM(call_args, 0)))
        args = PyTuple_GET_ITEM(call_args, 0);
    return dispatch_args((PyObject *)self, args);
}

PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitc._runtime.Dispatcher",
    .tp_doc = "Dispatcher(entry_address, arg_specs, out_specs, constants, workspace_bytes, "
              "result_kind, release_gil, donations=None, owner=None, name=None, writes=None): call "
              "compiled code on arrays of one signature; donations[i] names the argument result "
              "i is written into; owner keeps the machine code alive; name is the function's, "
              "for error messages; writes[k] names the argument that the k-th of the last "
              "len(writes) results is copied into after the call (not returned). symbolic="
              "(binder, nkeys, nsymbols, dims_last, release_elements): an argument dimension "
              "-1-k is key slot k (a symbol: the same slot wherever it stands alone); "
              "binder(args) gives a key's (dims, result shapes, workspace bytes), or None when "
              "the shapes are not this code's; release_elements: the elements touched from "
              "which a call releases the GIL.",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Dispatcher_traverse,
    .tp_clear = (inquiry)Dispatcher_clear,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Dispatcher_init,
    .tp_dealloc = (destructor)Dispatcher_dealloc,
    .tp_call = (ternaryfunc)Dispatcher_call,
};
