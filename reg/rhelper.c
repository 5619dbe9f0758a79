/*
 * rhelper.c -- P4's registration helper (rhelper.h).
 */
#include <execinfo.h>
#include <string.h>
#include "rhelper.h"

void rh_init(rhelper_t * h, const rh_ops_t * ops, void *ctx)
{
    memset(h, 0, sizeof(*h));
    h->ops = *ops;
    h->ctx = ctx;
}

static uint64_t rh_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

uint64_t rh_site(size_t len)
{
    void *fr[RH_FRAMES];
    int i, n = len < RH_SITE_MIN ? 0 : backtrace(fr, RH_FRAMES);
    uint64_t h = 1;

    for (i = 0; i < n; i++)
        h = rh_mix(h, (uintptr_t) fr[i]);
    return n ? h : 0;
}

/* ------------------------------------------------------------- owner */

#define RH_COUNT(h_, f_) __atomic_fetch_add(&(h_)->f_, 1, __ATOMIC_RELAXED)

int rh_note(rhelper_t * h, double t, int cache, uintptr_t start, size_t len, uint64_t site)
{
    uint64_t head = h->head, tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);

    if (head - tail == RH_RING) {
        RH_COUNT(h, st.dropped_notes);
        return 0;
    }
    h->ring[head % RH_RING] = (rh_note_t) { t, start, len,
        rh_mix(rh_mix(site, h->prev_site), (uint64_t) cache), cache
    };
    h->prev_site = site;
    __atomic_store_n(&h->head, head + 1, __ATOMIC_RELEASE);
    return head == tail;
}

/* ------------------------------------------------------------ helper */

/* The registration time of len bytes from the fit y = a + b x (x: pages,
 * y: seconds); the mean while every timed size was the same. */
double rh_reg_time(const rhelper_t * h, size_t len)
{
    const double *f = h->fit;
    double x = (double) (len >> 12), d = f[0] * f[4] - f[1] * f[1], b, a;

    if (f[0] == 0)
        return 0;
    b = d > 0 ? (f[0] * f[3] - f[1] * f[2]) / d : 0;
    a = (f[2] - b * f[1]) / f[0];
    return a + b * x > 0 ? a + b * x : 0;
}

static void rh_fit_add(rhelper_t * h, size_t len, double secs)
{
    double x = (double) (len >> 12);

    h->fit[0] += 1;
    h->fit[1] += x;
    h->fit[2] += secs;
    h->fit[3] += x * secs;
    h->fit[4] += x * x;
}

static void rh_rq_swap(rhelper_t * h, int i, int j)
{
    rh_note_t t = h->rq[i];

    h->rq[i] = h->rq[j];
    h->rq[j] = t;
}

static void rh_rq_push(rhelper_t * h, const rh_note_t * n)
{
    int i = h->nrq;

    if (h->nrq == RH_RQ)
        return;
    h->rq[h->nrq++] = *n;
    for (; i > 0 && h->rq[(i - 1) / 2].t > h->rq[i].t; i = (i - 1) / 2)
        rh_rq_swap(h, i, (i - 1) / 2);
}

static void rh_rq_pop(rhelper_t * h)
{
    int i = 0, c;

    h->rq[0] = h->rq[--h->nrq];
    while ((c = 2 * i + 1) < h->nrq) {
        if (c + 1 < h->nrq && h->rq[c + 1].t < h->rq[c].t)
            c++;
        if (h->rq[i].t <= h->rq[c].t)
            break;
        rh_rq_swap(h, i, c);
        i = c;
    }
}

/* The entry of sig (a new one replaces whatever held its slot). */
static rh_entry_t *rh_lookup(rhelper_t * h, uint64_t sig, int *fresh)
{
    rh_entry_t *e = &h->table[(sig ^ sig >> 32) % RH_TABLE];

    *fresh = e->sig != sig;
    if (*fresh)
        *e = (rh_entry_t) { sig, 0, 0 };
    return e;
}

/* One use: drop the region until shortly before the predicted next one. */
static void rh_predict(rhelper_t * h, rh_note_t * n, double now)
{
    int fresh;
    rh_entry_t *e = rh_lookup(h, rh_mix(n->site, n->start ^ (uint64_t) n->len << 40), &fresh);
    double gap = n->t - e->last, early;

    if (!fresh && gap > 0 && (e->period == 0 || gap < e->period))
        e->period = gap;
    e->last = n->t;
    if (fresh || e->period == 0) {
        h->ops.drop(h->ctx, n->cache, n->start, n->len);
        RH_COUNT(h, st.drops);
        return;
    }
    early = 2 * rh_reg_time(h, n->len) + RH_MARGIN;
    n->t += e->period - early;
    if (n->t <= now + rh_reg_time(h, n->len)) {
        RH_COUNT(h, st.kept);
        return;
    }
    h->ops.drop(h->ctx, n->cache, n->start, n->len);
    RH_COUNT(h, st.drops);
    rh_rq_push(h, n);
}

static void rh_register(rhelper_t * h, const rh_note_t * n)
{
    double t0 = h->ops.now();
    int r = h->ops.reg(h->ctx, n->cache, n->start, n->len);

    if (r > 0) {
        rh_fit_add(h, n->len, h->ops.now() - t0);
        RH_COUNT(h, st.regs);
    }
    if (r < 0)
        RH_COUNT(h, st.reg_fails);
}

/* The paper's alternation: one note, then the registrations due, until
 * both are done. */
double rh_run(rhelper_t * h, double now)
{
    uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
    rh_note_t n;

    while (h->tail != head || (h->nrq && h->rq[0].t <= now)) {
        if (h->tail != head) {
            n = h->ring[h->tail % RH_RING];
            __atomic_store_n(&h->tail, h->tail + 1, __ATOMIC_RELEASE);
            RH_COUNT(h, st.notes);
            rh_predict(h, &n, now);
        }
        while (h->nrq && h->rq[0].t <= now) {
            n = h->rq[0];
            rh_rq_pop(h);
            rh_register(h, &n);
        }
        now = h->ops.now();
    }
    return h->nrq ? h->rq[0].t : 0;
}

void rh_stats_get(const rhelper_t * h, rh_stats_t * st)
{
    st->notes = __atomic_load_n(&h->st.notes, __ATOMIC_RELAXED);
    st->dropped_notes = __atomic_load_n(&h->st.dropped_notes, __ATOMIC_RELAXED);
    st->drops = __atomic_load_n(&h->st.drops, __ATOMIC_RELAXED);
    st->regs = __atomic_load_n(&h->st.regs, __ATOMIC_RELAXED);
    st->reg_fails = __atomic_load_n(&h->st.reg_fails, __ATOMIC_RELAXED);
    st->kept = __atomic_load_n(&h->st.kept, __ATOMIC_RELAXED);
}
