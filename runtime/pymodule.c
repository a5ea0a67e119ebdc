/* jitc._runtime: the C runtime as an importable extension.
 *
 * It carries the thread pool (its symbols are handed to LLVM so JIT-compiled code can call
 * it), `Dispatcher` (dispatcher.c), the fast path from Python into a compiled function, with
 * the recycled result memory it allocates from (results.c), and here the callables in front
 * of it: `Guarded` and `FastCall`.
 */
#define JITC_IMPORTS_NUMPY
#include "pymodule.h"

#include "jitc_runtime.h"

PyObject *no_result;

/* Guarded(dispatcher, guards): the dispatcher, run only while each guard holds, with the
   arrays some guards read appended to the arguments. A guard is (container, key, expected,
   mode) on the value at `container[key]` (a dict; or a cell's contents, key None): mode
   GUARD_IS, the value is `expected`; GUARD_TYPE, its type is; GUARD_ARRAY, it is a numpy
   array (exactly), passed on as the next captured argument (the dispatcher checks its dtype,
   shape and layout). These are the checks of a state reader (jitc.tracing.guards) that reads
   only dicts and cells: the helper functions and modules a function reaches through its
   globals and closure, and the global arrays it reads. */
enum { GUARD_IS = 0, GUARD_TYPE = 1, GUARD_ARRAY = 2 };

typedef struct {
    PyObject_HEAD
    PyObject *dispatcher;
    PyObject *guards;
    Py_ssize_t arrays;  /* how many guards are GUARD_ARRAY */
} Guarded;

static int Guarded_init(Guarded *self, PyObject *args, PyObject *kwds) {
    PyObject *dispatcher, *guards;
    if (!PyArg_ParseTuple(args, "O!O!", &DispatcherType, &dispatcher, &PyTuple_Type, &guards))
        return -1;
    self->arrays = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(guards); i++) {
        PyObject *guard = PyTuple_GET_ITEM(guards, i);
        long mode = -1;
        if (PyTuple_Check(guard) && PyTuple_GET_SIZE(guard) == 4 &&
            PyLong_Check(PyTuple_GET_ITEM(guard, 3)))
            mode = PyLong_AsLong(PyTuple_GET_ITEM(guard, 3));
        if (mode < GUARD_IS || mode > GUARD_ARRAY ||
            !(PyDict_Check(PyTuple_GET_ITEM(guard, 0)) ||
              PyCell_Check(PyTuple_GET_ITEM(guard, 0)))) {
            PyErr_SetString(PyExc_TypeError, "a guard is (dict or cell, key, expected, mode)");
            return -1;
        }
        self->arrays += mode == GUARD_ARRAY;
    }
    Py_XSETREF(self->dispatcher, Py_NewRef(dispatcher));
    Py_XSETREF(self->guards, Py_NewRef(guards));
    return 0;
}

/* 1 when every guard holds, 0 when one does not, -1 on an error. The arrays read go to
   `arrays[0..]` (borrowed). */
static int guards_hold(PyObject *guards, PyObject **arrays) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(guards); i++) {
        PyObject *guard = PyTuple_GET_ITEM(guards, i);
        PyObject *container = PyTuple_GET_ITEM(guard, 0);
        PyObject *found;
        if (PyCell_Check(container)) {
            found = PyCell_GET(container);
        } else {
            found = PyDict_GetItemWithError(container, PyTuple_GET_ITEM(guard, 1));
            if (!found && PyErr_Occurred()) return -1;
        }
        if (!found) return 0;
        PyObject *expected = PyTuple_GET_ITEM(guard, 2);
        switch (PyLong_AS_LONG(PyTuple_GET_ITEM(guard, 3))) {
        case GUARD_IS:
            if (found != expected) return 0;
            break;
        case GUARD_TYPE:
            if ((PyObject *)Py_TYPE(found) != expected) return 0;
            break;
        default:
            if (!PyArray_CheckExact(found)) return 0;
            *arrays++ = found;
        }
    }
    return 1;
}

static PyObject *guarded_dispatch(Guarded *self, PyObject *args) {
    PyObject *stack_arrays[STACK_BUFFERS];
    PyObject **arrays = self->arrays <= STACK_BUFFERS
        ? stack_arrays : PyMem_Malloc(self->arrays * sizeof(PyObject *));
    if (!arrays) return PyErr_NoMemory();
    PyObject *result = NULL;
    int hold = guards_hold(self->guards, arrays);
    if (hold < 0) goto done;
    if (!hold) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (!self->arrays) {
        result = dispatch_args(self->dispatcher, args);
        goto done;
    }
    Py_ssize_t given = PyTuple_GET_SIZE(args);
    PyObject *all = PyTuple_New(given + self->arrays);
    if (!all) goto done;
    for (Py_ssize_t i = 0; i < given; i++)
        PyTuple_SET_ITEM(all, i, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    for (Py_ssize_t i = 0; i < self->arrays; i++)
        PyTuple_SET_ITEM(all, given + i, Py_NewRef(arrays[i]));
    result = dispatch_args(self->dispatcher, all);
    Py_DECREF(all);
done:
    if (arrays != stack_arrays) PyMem_Free(arrays);
    return result;
}

static PyObject *Guarded_call(Guarded *self, PyObject *call_args, PyObject *kwds) {
    if (kwds && PyDict_GET_SIZE(kwds)) Py_RETURN_NONE;
    PyObject *args = call_args;
    if (PyTuple_GET_SIZE(call_args) == 1 && PyTuple_Check(PyTuple_GET_ITEM(call_args, 0)))
        args = PyTuple_GET_ITEM(call_args, 0);
    return guarded_dispatch(self, args);
}

static int Guarded_traverse(Guarded *self, visitproc visit, void *arg) {
    Py_VISIT(self->dispatcher);
    Py_VISIT(self->guards);
    return 0;
}

static int Guarded_clear(Guarded *self) {
    Py_CLEAR(self->dispatcher);
    Py_CLEAR(self->guards);
    return 0;
}

static void Guarded_dealloc(Guarded *self) {
    PyObject_GC_UnTrack(self);
    Guarded_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject GuardedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitc._runtime.Guarded",
    .tp_doc = "Guarded(dispatcher, guards): the dispatcher, called only while every guard "
              "(container, key, expected, mode) holds on container[key] (a dict, or a cell "
              "with key None): mode 0, it is expected; 1, its type is; 2, it is a numpy "
              "array, appended to the arguments.",
    .tp_basicsize = sizeof(Guarded),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Guarded_init,
    .tp_dealloc = (destructor)Guarded_dealloc,
    .tp_traverse = (traverseproc)Guarded_traverse,
    .tp_clear = (inquiry)Guarded_clear,
    .tp_call = (ternaryfunc)Guarded_call,
};

/* FastCall: the base class of jitc.jit's callable. A call with positional arguments only
   goes straight to `_fast` (a Dispatcher or Guarded, checked and run here, or any callable
   taking the argument tuple); when it has none, or answers None (not its signature), the call goes to
   the Python method `_general_call(args, kwargs)`. Doing this in C rather than in a Python
   `__call__` saves the frame and the `*args` packing: about half the cost of a small call. */
typedef struct {
    PyObject_HEAD
    PyObject *fast;
} FastCall;

static PyObject *general_call_name;

static PyObject *FastCall_call(FastCall *self, PyObject *args, PyObject *kwds) {
    PyObject *fast = self->fast;
    if (fast && fast != Py_None && !(kwds && PyDict_GET_SIZE(kwds))) {
        Py_INCREF(fast);  /* a call may replace `_fast` (recompiling) while this one runs */
        PyObject *result = Py_IS_TYPE(fast, &DispatcherType)
            ? dispatch_args(fast, args)
            : Py_IS_TYPE(fast, &GuardedType) ? guarded_dispatch((Guarded *)fast, args)
            : PyObject_CallOneArg(fast, args);
        Py_DECREF(fast);
        if (!result) return NULL;
        if (result == no_result) {
            Py_DECREF(result);
            Py_RETURN_NONE;
        }
        if (result != Py_None) return result;
        Py_DECREF(result);
    }
    PyObject *kwargs = kwds ? Py_NewRef(kwds) : PyDict_New();
    if (!kwargs) return NULL;
    PyObject *result = PyObject_CallMethodObjArgs((PyObject *)self, general_call_name, args,
                                                  kwargs, NULL);
    Py_DECREF(kwargs);
    return result;
}

static int FastCall_traverse(FastCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->fast);
    return 0;
}

static int FastCall_clear(FastCall *self) {
    Py_CLEAR(self->fast);
    return 0;
}

static void FastCall_dealloc(FastCall *self) {
    PyObject_GC_UnTrack(self);
    FastCall_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *FastCall_get_fast(FastCall *self, void *closure) {
    return Py_NewRef(self->fast ? self->fast : Py_None);
}

static int FastCall_set_fast(FastCall *self, PyObject *value, void *closure) {
    Py_XSETREF(self->fast, value == Py_None ? NULL : Py_XNewRef(value));
    return 0;
}

static PyGetSetDef FastCall_getset[] = {
    {"_fast", (getter)FastCall_get_fast, (setter)FastCall_set_fast,
     "The positional fast path (None: every call takes _general_call).", NULL},
    {NULL},
};

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jitc._runtime.FastCall",
    .tp_doc = "Base of a callable whose positional calls try `_fast(args)` first, in C, and "
              "otherwise call `_general_call(args, kwargs)`.",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)FastCall_dealloc,
    .tp_traverse = (traverseproc)FastCall_traverse,
    .tp_clear = (inquiry)FastCall_clear,
    .tp_call = (ternaryfunc)FastCall_call,
    .tp_getset = FastCall_getset,
};

static PyMethodDef runtime_functions[] = {
    {"release_recycled_results", release_recycled, METH_NOARGS,
     "Free the result memory kept for reuse (it is otherwise kept until the process ends)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef runtime_module = {
    PyModuleDef_HEAD_INIT, "_runtime", "jitc's C runtime: thread pool and call dispatch.", -1,
    runtime_functions,
};

PyMODINIT_FUNC PyInit__runtime(void) {
    import_array();
    if (PyType_Ready(&DispatcherType) < 0 || PyType_Ready(&FastCallType) < 0 ||
        PyType_Ready(&GuardedType) < 0)
        return NULL;
    general_call_name = PyUnicode_InternFromString("_general_call");
    if (!general_call_name) return NULL;
    if (init_recycled_results() < 0) return NULL;
    PyObject *module = PyModule_Create(&runtime_module);
    if (!module) return NULL;
    Py_INCREF(&DispatcherType);
    if (PyModule_AddObject(module, "Dispatcher", (PyObject *)&DispatcherType) < 0) {
        Py_DECREF(&DispatcherType);
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "FastCall", (PyObject *)&FastCallType) < 0 ||
        PyModule_AddObjectRef(module, "Guarded", (PyObject *)&GuardedType) < 0)
        return NULL;
    PyModule_AddIntConstant(module, "RESULT_SINGLE", RESULT_SINGLE);
    PyModule_AddIntConstant(module, "RESULT_TUPLE", RESULT_TUPLE);
    PyModule_AddIntConstant(module, "RESULT_LIST", RESULT_LIST);
    PyModule_AddIntConstant(module, "RESULT_NONE", RESULT_NONE);
    no_result = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (!no_result || PyModule_AddObjectRef(module, "NO_RESULT", no_result) < 0) return NULL;
    return module;
}
