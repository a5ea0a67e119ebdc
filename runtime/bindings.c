/* A symbolic signature's bindings (docs/dynamic-shapes.md): the values of its key slots,
 * read from the argument shapes by dispatcher.c, are looked up in a small table that the
 * Python binder fills once per key with the symbol values, the result shapes and the
 * workspace size, or a miss (see `Binding`).
 */
#include "dispatcher.h"

#include <stdlib.h>
#include <string.h>

/* `symbolic` = (binder, nkeys, nsymbols, dims_last, release_elements): see Binding. */
int init_symbolic(Dispatcher *self, PyObject *symbolic) {
    PyObject *binder;
    Py_ssize_t nkeys, nsymbols, release_elements;
    int dims_last;
    if (!PyArg_ParseTuple(symbolic, "Onnpn", &binder, &nkeys, &nsymbols, &dims_last,
                          &release_elements))
        return -1;
    if (!PyCallable_Check(binder) || nkeys < 1 || nsymbols < 0) {
        PyErr_SetString(PyExc_ValueError, "symbolic = (binder, nkeys, nsymbols, dims_last, "
                        "release_elements) with a callable binder and at least one key");
        return -1;
    }
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        for (int d = 0; d < self->args[i].ndim; d++) {
            npy_intp dim = self->args[i].dims[d];
            if (SYMBOLIC_DIM(dim) && KEY_SLOT(dim) >= nkeys) {
                PyErr_SetString(PyExc_ValueError, "an argument dimension names no key slot");
                return -1;
            }
        }
    }
    free(self->bindings);
    self->bindings = calloc(BINDINGS, sizeof(Binding));
    if (!self->bindings) {
        PyErr_NoMemory();
        return -1;
    }
    Py_XSETREF(self->binder, Py_NewRef(binder));
    self->nkeys = nkeys;
    self->nsymbols = nsymbols;
    self->dims_last = dims_last;
    self->release_elements = release_elements;
    return 0;
}

void free_bindings(Dispatcher *self) {
    if (!self->bindings) return;
    for (int b = 0; b < BINDINGS; b++) {
        free(self->bindings[b].key);
        free(self->bindings[b].dims);
        free(self->bindings[b].out_dims);
    }
    free(self->bindings);
    self->bindings = NULL;
}

static size_t shape_bytes(int typenum, int ndim, const npy_intp *dims) {
    ArraySpec spec = {typenum, ndim, {0}};
    memcpy(spec.dims, dims, ndim * sizeof(npy_intp));
    return spec_bytes(&spec);
}

/* Fill `binding` for `key` from the binder's answer: None (the shapes are not this
   compilation's: a miss, remembered too) or (dims, result shapes, workspace bytes). */
static int fill_binding(Dispatcher *self, Binding *binding, const int64_t *key,
                        PyObject *bound, PyObject *args) {
    binding->used = 0;
    if (!binding->key) {
        binding->key = malloc(self->nkeys * sizeof(int64_t));
        binding->dims = malloc((self->nsymbols ? self->nsymbols : 1) * sizeof(int64_t));
        binding->out_dims = calloc((self->nouts ? self->nouts : 1) * NPY_MAXDIMS,
                                   sizeof(npy_intp));
        if (!binding->key || !binding->dims || !binding->out_dims) {
            PyErr_NoMemory();
            return -1;
        }
    }
    memcpy(binding->key, key, self->nkeys * sizeof(int64_t));
    binding->miss = bound == Py_None;
    if (binding->miss) {
        binding->used = 1;
        return 0;
    }
    PyObject *dims, *shapes;
    Py_ssize_t workspace;
    if (!PyArg_ParseTuple(bound, "OOn", &dims, &shapes, &workspace)) return -1;
    if (!PyTuple_Check(dims) || PyTuple_GET_SIZE(dims) != self->nsymbols ||
        !PyTuple_Check(shapes) || PyTuple_GET_SIZE(shapes) != self->nouts || workspace < 0) {
        PyErr_SetString(PyExc_ValueError, "a binding is (dims: tuple, result shapes: tuple, "
                        "workspace bytes), one value per symbol and one shape per result");
        return -1;
    }
    for (Py_ssize_t s = 0; s < self->nsymbols; s++)
        binding->dims[s] = PyLong_AsLongLong(PyTuple_GET_ITEM(dims, s));
    size_t touched = 0;
    for (Py_ssize_t i = 0; i < self->nargs; i++)
        touched += (size_t)PyArray_SIZE((PyArrayObject *)PyTuple_GET_ITEM(args, i));
    binding->large_results = 0;
    for (Py_ssize_t i = 0; i < self->nouts; i++) {
        PyObject *shape = PyTuple_GET_ITEM(shapes, i);
        ArraySpec *spec = &self->outs[i];
        if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != spec->ndim) {
            PyErr_SetString(PyExc_ValueError, "a bound result shape has the wrong rank");
            return -1;
        }
        npy_intp *out = binding->out_dims + i * NPY_MAXDIMS;
        size_t elements = 1;
        for (int d = 0; d < spec->ndim; d++) {
            out[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            elements *= (size_t)out[d];
        }
        touched += elements;
        if (PyErr_Occurred()) return -1;
        if (self->donated_from[i] < 0 &&
            shape_bytes(spec->typenum, spec->ndim, out) >= RECYCLE_MIN_BYTES)
            binding->large_results = 1;
    }
    if (PyErr_Occurred()) return -1;
    /* A write-back copies a result's bytes into its argument: they must be as many (were
       they not, the general path would say why). */
    for (Py_ssize_t w = 0; w < self->nwrites; w++) {
        Py_ssize_t out = self->nouts - self->nwrites + w;
        PyArrayObject *target = (PyArrayObject *)PyTuple_GET_ITEM(args, self->writes_to[w]);
        if (shape_bytes(self->outs[out].typenum, self->outs[out].ndim,
                        binding->out_dims + out * NPY_MAXDIMS) != (size_t)PyArray_NBYTES(target))
            binding->miss = 1;
    }
    binding->workspace_bytes = (size_t)workspace;
    binding->release_gil = touched + binding->workspace_bytes / 4 >= (size_t)self->release_elements;
    binding->used = 1;
    return 0;
}

/* The binding of the key the arguments gave (bound by Python the first time a key is seen),
   or NULL with an exception set. */
static Binding *find_binding(Dispatcher *self, const int64_t *key, PyObject *args) {
    size_t key_bytes = self->nkeys * sizeof(int64_t);
    for (int n = 0; n < BINDINGS; n++) {
        int b = (self->last_hit + n) % BINDINGS;
        Binding *binding = &self->bindings[b];
        if (binding->used && memcmp(binding->key, key, key_bytes) == 0) {
            self->last_hit = b;
            return binding;
        }
    }
    PyObject *bound = PyObject_CallOneArg(self->binder, args);
    if (!bound) return NULL;
    /* Taken after the binder ran: it may have let another thread fill a binding meanwhile. */
    int b = self->next_binding;
    self->next_binding = (b + 1) % BINDINGS;
    int status = fill_binding(self, &self->bindings[b], key, bound, args);
    Py_DECREF(bound);
    if (status < 0) return NULL;
    self->last_hit = b;
    return &self->bindings[b];
}

void free_call_shape(CallShape *shape) {
    PyMem_Free(shape->dims_heap);
    PyMem_Free(shape->out_dims_heap);
}

/* 1: the arguments' shapes are this compilation's and `shape` holds their binding; 0: a
   miss; -1: an error. */
int bind_call(Dispatcher *self, PyObject *args, const int64_t *key, CallShape *shape) {
    Binding *binding = find_binding(self, key, args);
    if (!binding) return -1;
    if (binding->miss) return 0;
    shape->workspace_bytes = binding->workspace_bytes;
    shape->release_gil = binding->release_gil;
    shape->large_results = binding->large_results;
    Py_ssize_t out_total = 0;
    for (Py_ssize_t i = 0; i < self->nouts; i++) out_total += self->outs[i].ndim;
    int64_t *dims = shape->dims;
    npy_intp *out_dims = shape->out_dims;
    if (self->nsymbols > STACK_DIMS)
        dims = shape->dims_heap = PyMem_Malloc(self->nsymbols * sizeof(int64_t));
    if (out_total > STACK_DIMS)
        out_dims = shape->out_dims_heap = PyMem_Malloc(out_total * sizeof(npy_intp));
    if (!dims || !out_dims) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(dims, binding->dims, self->nsymbols * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < self->nouts; i++) {
        memcpy(out_dims, binding->out_dims + i * NPY_MAXDIMS,
               self->outs[i].ndim * sizeof(npy_intp));
        out_dims += self->outs[i].ndim;
    }
    return 1;
}

