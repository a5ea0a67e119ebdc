/* jitc._runtime: the C runtime as an importable extension, so JIT-compiled code can call it
 * (its symbols are looked up through ctypes and handed to LLVM). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef runtime_module = {
    PyModuleDef_HEAD_INIT, "_runtime", "jitc's C runtime (thread pool).", -1, NULL,
};

PyMODINIT_FUNC PyInit__runtime(void) { return PyModule_Create(&runtime_module); }
