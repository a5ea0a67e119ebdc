/* The C ABI shared by every library `jitc aot` builds.
 *
 * A generated header (libNAME.h) carries a copy of this file, so a program needs nothing else
 * from jitc. Several generated headers may be included in one translation unit: the include
 * guard keeps one copy of these definitions. The values must not change without a new
 * JITC_AOT_ABI_VERSION; jitc/aot/abi.py holds the same table and a test keeps them equal.
 */
#ifndef JITC_AOT_H
#define JITC_AOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JITC_AOT_ABI_VERSION 1

/* Status codes returned by every exported function; NAME_error_string(code) describes them. */
enum jitc_status {
    JITC_OK = 0,
    JITC_ERROR_NULL_POINTER = 1,       /* an argument or result pointer is NULL */
    JITC_ERROR_OUT_OF_MEMORY = 2,      /* the temporary workspace could not be allocated */
    JITC_ERROR_BAD_WORKSPACE = 3,      /* caller workspace NULL or not aligned */
    JITC_ERROR_OVERLAPPING_BUFFERS = 4, /* a result buffer overlaps an argument or result */
    JITC_ERROR_BAD_DIMENSION = 5        /* a dimension argument is negative or breaks a
                                           constraint of the function */
};

/* Element types, as the header's NAME_ARGi_DTYPE / NAME_RESi_DTYPE macros give them. */
enum jitc_dtype {
    JITC_BOOL = 0, /* bool: one byte, 0 or 1 */
    JITC_I8 = 1,   /* int8_t */
    JITC_U8 = 2,   /* uint8_t */
    JITC_I32 = 3,  /* int32_t */
    JITC_I64 = 4,  /* int64_t */
    JITC_F16 = 5,  /* jitc_f16: IEEE binary16 bits */
    JITC_F32 = 6,  /* float */
    JITC_F64 = 7,  /* double */
    JITC_I16 = 8,  /* int16_t */
    JITC_U16 = 9,  /* uint16_t */
    JITC_U32 = 10, /* uint32_t */
    JITC_U64 = 11  /* uint64_t */
};

/* Half-precision elements are passed as their 16 bits; C has no portable binary16 type. */
typedef uint16_t jitc_f16;

/* A caller-provided workspace must start at a multiple of this many bytes. Every
 * NAME_WORKSPACE_BYTES is a multiple of it, so aligned_alloc(JITC_WORKSPACE_ALIGNMENT,
 * NAME_WORKSPACE_BYTES) is a valid C11 call. */
#define JITC_WORKSPACE_ALIGNMENT 64

#endif
