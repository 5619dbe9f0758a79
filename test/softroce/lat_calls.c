/*
 * lat_calls.c: LAT_CALLS for verbs_selftest lat. 256 distinct functions of a few
 * instructions; lat_calls_run(n) calls the first n through a table, a stand-in for the
 * code an MPI stack runs once per message. Under qemu's TCG such code costs far more than
 * in a loop (docs/results/verbs-vm.md: "Code run once per message is dear here").
 */
#include "lat_calls.h"

/* f1000..f4333: the name's digits in base 4 (a distinct octal constant each) */
#define F(k) static __attribute__((noinline)) uint32_t f##k(uint32_t x) \
    { return x * 2654435761u + 0##k; }
#define F4(k) F(k##0) F(k##1) F(k##2) F(k##3)
#define F16(k) F4(k##0) F4(k##1) F4(k##2) F4(k##3)
#define F64(k) F16(k##0) F16(k##1) F16(k##2) F16(k##3)
#define T(k) f##k,
#define T4(k) T(k##0) T(k##1) T(k##2) T(k##3)
#define T16(k) T4(k##0) T4(k##1) T4(k##2) T4(k##3)
#define T64(k) T16(k##0) T16(k##1) T16(k##2) T16(k##3)

F64(1) F64(2) F64(3) F64(4)
static uint32_t (*const fn[LAT_CALLS_MAX])(uint32_t) = { T64(1) T64(2) T64(3) T64(4) };

uint32_t lat_calls_run(uint32_t n)
{
    uint32_t s = n;

    for (uint32_t i = 0; i < n && i < LAT_CALLS_MAX; i++)
        s = fn[i](s);
    return s;
}
