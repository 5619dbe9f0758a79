/*
 * t_rhelper: TAP test of P4's registration helper (rhelper.h) over a
 * fake clock and a fake backend: a first use is dropped at once; periodic
 * uses are dropped and registered again before the next one; uses too
 * close together stay registered; call sites with different periods are
 * told apart; the registration-time fit is linear in pages; the ring
 * between two real threads loses nothing it does not count.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include "rhelper.h"
#include "tap.h"

static double CLOCK;            /* fake time, seconds */
static double REG_A = 50e-6, REG_B = 1e-6;      /* fake registration cost */

typedef struct fake {
    int drops, regs, registered;        /* registered: the one region's state */
    double last_reg;
} fake_t;

static fake_t F;

static double f_now(void)
{
    return CLOCK;
}

static void f_drop(void *ctx, int cache, uintptr_t start, size_t len)
{
    (void) ctx, (void) cache, (void) start, (void) len;
    F.drops++;
    F.registered = 0;
}

static int f_reg(void *ctx, int cache, uintptr_t start, size_t len)
{
    (void) ctx, (void) cache, (void) start;
    if (F.registered)
        return 0;
    CLOCK += REG_A + REG_B * (double) (len >> 12);
    F.regs++;
    F.registered = 1;
    F.last_reg = CLOCK;
    return 1;
}

static const rh_ops_t ops = { f_drop, f_reg, f_now };
static rhelper_t H;

static void setup(void)
{
    memset(&F, 0, sizeof(F));
    CLOCK = 100;
    rh_init(&H, &ops, NULL);
}

/* The owner uses the region at CLOCK (a miss registers it), then the
 * helper runs; returns whether the use found it registered. */
static int use(uintptr_t at, size_t len, uint64_t site)
{
    int was = F.registered;

    F.registered = 1;
    rh_note(&H, CLOCK, 0, at, len, site);
    rh_run(&H, CLOCK);
    return was;
}

/* Advance to t, running the helper at every deadline it asks for. */
static void until(double t)
{
    double next;

    while ((next = rh_run(&H, CLOCK)) > 0 && next <= t)
        CLOCK = next > CLOCK ? next : CLOCK;
    CLOCK = t > CLOCK ? t : CLOCK;
}

static void t_periodic(void)
{
    rh_stats_t st;
    int i, hits = 0;

    setup();
    ok(!use(0x100000, 1 << 20, 7) && F.drops == 1 && !F.registered,
       "first use: dropped at once (no period yet)");
    /* the second use has a new context (a previous call site): new too */
    for (i = 1; i <= 20; i++) {
        until(100 + 0.01 * i);
        hits += use(0x100000, 1 << 20, 7);
    }
    rh_stats_get(&H, &st);
    ok(hits == 18 && st.regs == 18 && F.drops == 21,
       "period 10 ms: dropped after each use, registered again before the next (%d of 18)",
       hits);
    ok(rh_reg_time(&H, 1 << 20) > 0.9 * (REG_A + 256 * REG_B)
       && rh_reg_time(&H, 1 << 20) < 1.1 * (REG_A + 256 * REG_B),
       "registration time learnt: %.1f us for 1 MiB", 1e6 * rh_reg_time(&H, 1 << 20));
}

static void t_close_uses(void)
{
    rh_stats_t st;
    int i;

    setup();
    for (i = 0; i < 50; i++) {
        until(100 + 50e-6 * i);
        use(0x100000, 1 << 20, 7);
    }
    rh_stats_get(&H, &st);
    ok(st.kept == 48 && F.drops == 2 && F.registered,
       "uses 50 us apart (under the registration time): kept registered");
}

/* Two call sites use the same region, with different periods: each keeps
 * its own (the context window separates them). */
static void t_sites(void)
{
    rh_stats_t st;
    int i;

    setup();
    for (i = 0; i < 40; i++) {
        until(100 + 0.005 * i);
        use(0x100000, 1 << 16, i % 4 ? 1 : 2);
    }
    rh_stats_get(&H, &st);
    ok(st.notes == 40 && st.regs > 0 && st.drops > 0,
       "two call sites on one region: %lu registrations ahead, %lu drops, %lu kept",
       (unsigned long) st.regs, (unsigned long) st.drops, (unsigned long) st.kept);
}

static void t_full(void)
{
    rh_stats_t st;
    int i;

    setup();
    for (i = 0; i < RH_RING + 10; i++)
        rh_note(&H, CLOCK, 0, 0x100000 + (uintptr_t) i * 65536, 65536, 3);
    rh_run(&H, CLOCK);
    rh_stats_get(&H, &st);
    ok(st.notes == RH_RING && st.dropped_notes == 10,
       "a full ring drops notes and counts them (%lu)", (unsigned long) st.dropped_notes);
}

static volatile int STOP;

static void *consumer(void *arg)
{
    (void) arg;
    while (!__atomic_load_n(&STOP, __ATOMIC_ACQUIRE))
        rh_run(&H, CLOCK);
    rh_run(&H, CLOCK);
    return NULL;
}

static void t_threads(void)
{
    enum { N = 200000 };
    pthread_t t;
    rh_stats_t st;
    int i;

    setup();
    pthread_create(&t, NULL, consumer, NULL);
    for (i = 0; i < N; i++) {
        while (H.head - __atomic_load_n(&H.tail, __ATOMIC_ACQUIRE) > RH_RING / 2 && i % 1000)
            ;                   /* mostly paced; every 1000th may find it full */
        rh_note(&H, CLOCK, 0, 0x100000 + (uintptr_t) (i % 64) * 65536, 65536, (uint64_t) i % 3);
    }
    __atomic_store_n(&STOP, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    rh_stats_get(&H, &st);
    ok(st.notes + st.dropped_notes == N && st.notes > N / 2 && H.tail == H.head,
       "two threads: %lu notes handled + %lu dropped = %d", (unsigned long) st.notes,
       (unsigned long) st.dropped_notes, N);
}

static __attribute__((noinline)) uint64_t site_b(size_t len)
{
    return rh_site(len);
}

/* The call site: the same for the same stack, another for another stack,
 * none below RH_SITE_MIN. */
static void t_site(void)
{
    volatile int two = 2;       /* one call site, not an unrolled pair */
    uint64_t a[2], b;
    int i;

    for (i = 0; i < two; i++)
        a[i] = site_b(RH_SITE_MIN);
    b = site_b(RH_SITE_MIN);
    ok(a[0] == a[1] && a[0] != b && a[0] != 0 && site_b(RH_SITE_MIN - 1) == 0,
       "call sites: same stack, same site; another caller, another site; none for small uses");
}

int main(void)
{
    t_periodic();
    t_close_uses();
    t_sites();
    t_full();
    t_threads();
    t_site();
    return done_testing();
}
