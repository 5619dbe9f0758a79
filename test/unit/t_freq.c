/*
 * t_freq: unit tests of the frequent-buffer table (reg/freq, P2):
 * counting per (address, length), the register-after threshold, chaining
 * under a small table, the growth stop, and the paper's threshold formula.
 */
#include <stdlib.h>
#include "freq.h"
#include "tap.h"

static char buf[1 << 20];

static void t_count(void)
{
    freq_t f;
    int i, first = -1;

    is_int(freq_init(&f, 0, 10), RDMA_ERR_INVAL, "0 bits refused");
    is_int(freq_init(&f, 20, 1024), RDMA_OK, "20-bit table (the paper's 1 M buckets)");
    for (i = 1; i <= 10 && first < 0; i++)
        if (freq_use(&f, buf, 8192, 8))
            first = i;
    is_int(first, 8, "a buffer is frequent at its 8th use with uses = 8");
    ok(freq_use(&f, buf, 8192, 8) && !freq_use(&f, buf, 4096, 8),
       "the same address with another length is another buffer");
    ok(!freq_use(&f, buf + 64, 8192, 0), "uses 0: counted, never frequent");
    is_size(f.st.entries, 3, "three buffers counted");
    is_size(f.st.frequent, 1, "one of them frequent");
    freq_destroy(&f);
    freq_destroy(&f);
    ok(f.bucket == NULL, "destroy twice is harmless");
}

/* 2 buckets: everything chains; the table stops growing once fewer than
 * 20% of its entries are frequent, and keeps counting those it has. */
static void t_stop(void)
{
    freq_t f;
    int i, hot = 0;

    freq_init(&f, 1, 1000);
    for (i = 0; i < 3 && !f.st.chained; i++)
        freq_use(&f, buf + 256 * i, 256, 2);
    ok(f.st.chained > 0 && !f.stopped, "2 buckets: a chain by the 3rd buffer; nothing stopped yet");
    for (i = 3; i < 20; i++)
        freq_use(&f, buf + 256 * i, 256, 2);
    ok(f.stopped, "no frequent entry among %llu, chains: growth stopped at the next new buffer",
       (unsigned long long) f.st.entries);
    ok(f.st.entries < 20 && f.st.uncounted > 0, "later buffers uncounted (%llu in, %llu not)",
       (unsigned long long) f.st.entries, (unsigned long long) f.st.uncounted);
    ok(!freq_use(&f, buf + 256 * 19, 256, 1), "a buffer never counted never becomes frequent");
    for (i = 0; i < 2; i++)
        hot = freq_use(&f, buf, 256, 2);
    ok(hot, "a buffer in the table still becomes frequent after the stop");
    freq_destroy(&f);

    freq_init(&f, 1, 1000);
    for (i = 0; i < 200; i++) {
        freq_use(&f, buf + 256 * i, 256, 1);
        freq_use(&f, buf + 256 * i, 256, 1);
    }
    ok(!f.stopped && f.st.entries == 200, "all entries frequent: the table keeps growing");
    freq_destroy(&f);

    freq_init(&f, 4, 5);
    for (i = 0; i < 10; i++)
        freq_use(&f, buf + 256 * i, 256, 1);
    is_size(f.st.entries, 5, "max_entries bounds the table");
    freq_destroy(&f);
}

/* Many buffers, long chains (uses 1: all frequent, so growth goes on):
 * lookups find their own entry; then uses 3 on a fresh table. */
static void t_many(void)
{
    freq_t f;
    int i, k, good = 1;

    freq_init(&f, 8, 1 << 16);
    for (k = 1; k <= 3; k++)
        for (i = 0; i < 4000; i++)
            good &= freq_use(&f, buf + 128 * i, 128 + (i & 7), 1);
    ok(good && f.st.entries == 4000 && f.st.frequent == 4000 && f.st.chained >= 4000 - 256,
       "4000 buffers in 256 buckets: 4000 entries, each frequent, chained");
    freq_destroy(&f);
    freq_init(&f, 20, 1 << 16);
    for (k = 1, good = 1; k <= 3; k++)
        for (i = 0; i < 100; i++)
            good &= freq_use(&f, buf + 8192 * i, 8192, 3) == (k == 3);
    ok(good, "100 buffers, 3 rounds: each frequent exactly at its third use");
    freq_destroy(&f);
}

/* n_min = Rm / (Cm - V), register at 25% (rounded up). */
static void t_auto(void)
{
    freq_cost_t c = { 40e-6, 1e-9, 0.2e-6 };   /* 40 us, 1 ns/B, 0.2 us */

    /* 8 KiB: Cm 8.192 us, n_min = 40 / 7.992 = 5.005 -> 25%: 1.25 -> 2 */
    is_int(freq_uses_auto(&c, 8192), 2, "8 KiB: ceil(0.25 * 40 / (8.192 - 0.2)) = 2");
    /* 512 B: 40 / 0.312 = 128.2 -> 32.05 -> 33 */
    is_int(freq_uses_auto(&c, 512), 33, "512 B: ceil(0.25 * 40 / (0.512 - 0.2)) = 33");
    is_int(freq_uses_auto(&c, 127), 0, "below 128 B: never");
    c.lookup = 10e-6;
    is_int(freq_uses_auto(&c, 8192), 0, "Cm <= V: never");
    c = (freq_cost_t) { 1e-9, 1e-9, 0 };
    is_int(freq_uses_auto(&c, 8192), 1, "registration almost free: at the first use");
}

int main(void)
{
    t_count();
    t_stop();
    t_many();
    t_auto();
    return done_testing();
}
