/* lat_calls.h: LAT_CALLS for verbs_selftest lat (lat_calls.c). */
#ifndef LAT_CALLS_H
#define LAT_CALLS_H
#include <stdint.h>

#define LAT_CALLS_MAX 256       /* distinct functions in lat_calls.c */

/* Call the first n (at most LAT_CALLS_MAX) of them, one after another. */
uint32_t lat_calls_run(uint32_t n);

#endif
