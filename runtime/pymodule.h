/* What the files of jitc._runtime share (pymodule.c: the module, Guarded and FastCall;
 * dispatcher.c: Dispatcher; results.c: the recycled result memory). */
#ifndef JITC_PYMODULE_H
#define JITC_PYMODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One numpy C-API table for the extension's files, filled by the module's import_array(). */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL jitc_runtime_numpy_api
#ifndef JITC_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#define ALIGNMENT 64
#define STACK_BUFFERS 64

enum { RESULT_SINGLE = 0, RESULT_TUPLE = 1, RESULT_LIST = 2, RESULT_NONE = 3 };

/* What a call of a function that returns nothing gives back (None means "no match"). */
extern PyObject *no_result;

/* dispatcher.c */
extern PyTypeObject DispatcherType;
/* A Dispatcher's call with exactly these arguments (a tuple): its result, or None when they
   are not of its signature. */
PyObject *dispatch_args(PyObject *dispatcher, PyObject *args);

/* results.c: results of at least RECYCLE_MIN_BYTES are allocated through the numpy memory
   handler in `result_handler_capsule` while `recycle_limit` is not 0. */
#define RECYCLE_MIN_BYTES ((size_t)1 << 20)
extern size_t recycle_limit;
extern PyObject *result_handler_capsule;
int init_recycled_results(void);
PyObject *release_recycled(PyObject *module, PyObject *unused);

#endif
