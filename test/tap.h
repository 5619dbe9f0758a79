/*
 * tap.h: a tiny TAP producer for the unit tests (header-only; the counters
 * are weak symbols, shared by every translation unit of one test program).
 *
 *   plan(n);                  optional; without it done_testing() prints it
 *   ok(cond, fmt, ...);       returns cond
 *   is_int(got, want, fmt, ...);  is_size(got, want, fmt, ...);
 *   skip(why);                "ok N # SKIP why": a test that cannot run here
 *   diag(fmt, ...);           "# ..." on stderr
 *   return done_testing();    exit status 1 on any failure or plan mismatch
 */
#ifndef TAP_H_INCLUDED
#define TAP_H_INCLUDED

#include <stdarg.h>
#include <stdio.h>

__attribute__((weak)) int tap_run, tap_failed, tap_planned = -1;

static inline void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
}

/* One write per line, so that forked tests do not interleave. */
static inline void diag(const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "# %s\n", line);
}

static inline void skip(const char *why)
{
    printf("ok %d # SKIP %s\n", ++tap_run, why);
    fflush(stdout);
}

/* One test line; on failure the location and, if given, got/want. */
static inline int tap_check(int cond, const char *file, int line, const char *got,
                            const char *want, const char *fmt, ...)
{
    va_list ap;

    printf("%sok %d - ", cond ? "" : "not ", ++tap_run);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    if (!cond) {
        tap_failed++;
        diag("  Failed test at %s line %d", file, line);
        if (got) {
            diag("         got: %s", got);
            diag("    expected: %s", want);
        }
    }
    return cond;
}

static inline const char *tap_fmt(char *buf, unsigned long long v, int is_signed)
{
    snprintf(buf, 32, is_signed ? "%lld" : "%llu", v);
    return buf;
}

#define ok(cond, ...) tap_check(!!(cond), __FILE__, __LINE__, NULL, NULL, __VA_ARGS__)
#define TAP_IS(T, S, got, want, ...) __extension__ ({ \
    T tap_g_ = (got), tap_w_ = (want); char tap_b1_[32], tap_b2_[32]; \
    tap_check(tap_g_ == tap_w_, __FILE__, __LINE__, \
              tap_fmt(tap_b1_, (unsigned long long) tap_g_, S), \
              tap_fmt(tap_b2_, (unsigned long long) tap_w_, S), __VA_ARGS__); })
#define is_int(got, want, ...) TAP_IS(long long, 1, got, want, __VA_ARGS__)
#define is_size(got, want, ...) TAP_IS(unsigned long long, 0, got, want, __VA_ARGS__)

static inline int done_testing(void)
{
    if (tap_planned < 0)
        printf("1..%d\n", tap_run);
    else if (tap_planned != tap_run)
        diag("planned %d tests but ran %d", tap_planned, tap_run);
    if (tap_failed)
        diag("failed %d of %d tests", tap_failed, tap_run);
    fflush(stdout);
    return tap_failed || (tap_planned >= 0 && tap_planned != tap_run);
}

#endif /* TAP_H_INCLUDED */
