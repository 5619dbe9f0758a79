/*
 * rb_config.c: checking a pipe configuration, and the superpipeline
 * schedule (seeds 000/002) the pipe and its tests compute with.  See
 * rb_pipe.h.
 */
#include "rb_pipe.h"

static int rb_pow2_is(size_t x)
{
    return x && !(x & (x - 1));
}

/* The largest ring a configuration reaches. */
static size_t rb_config_top(const rb_config_t * cfg)
{
    return cfg->ring_max > cfg->ring_size ? cfg->ring_max : cfg->ring_size;
}

rdma_status_t rb_config_check(const rb_config_t * cfg, const char **what)
{
    const char *bad = NULL;
    size_t top = cfg ? rb_config_top(cfg) : 0;

    if (!cfg)
        bad = "cfg";
    else if (!rb_pow2_is(cfg->ring_size) || cfg->ring_size < 4 * 64
             || cfg->ring_size > (RB_CREDIT_MASK >> 1))
        bad = "ring_size";
    else if (cfg->ring_max && (!rb_pow2_is(cfg->ring_max) || cfg->ring_max < cfg->ring_size
                               || cfg->ring_max > (RB_CREDIT_MASK >> 1)))
        bad = "ring_max";
    else if (!rb_pow2_is(cfg->chunk_size) || cfg->chunk_size < 64
             || cfg->chunk_size > cfg->ring_size / 4)
        bad = "chunk_size";
    else if (cfg->max_frame % cfg->chunk_size || cfg->max_frame < cfg->chunk_size
             || cfg->max_frame > top / 2 || cfg->max_frame - RB_FRAME_OVERHEAD > RB_LEN_MAX)
        bad = "max_frame";
    else if (cfg->quiet_frame && (cfg->quiet_frame % cfg->chunk_size
                                  || cfg->quiet_frame > cfg->max_frame))
        bad = "quiet_frame";
    else if (cfg->credit_threshold < cfg->chunk_size
             || cfg->credit_threshold > top - cfg->max_frame)
        bad = "credit_threshold";
    else if (cfg->mode != RB_MODE_PIGGYBACK && cfg->mode != RB_MODE_BASIC)
        bad = "mode";
    else if (cfg->completion_driven != 0 && cfg->completion_driven != 1)
        bad = "completion_driven";
    else if (cfg->sched_c0 && (cfg->sched_c0 < cfg->chunk_size || cfg->sched_c0 > cfg->sched_max))
        bad = "sched_c0";
    else if (cfg->sched_c0 && cfg->sched_max > top / 2)
        bad = "sched_max";
    else if (cfg->sched_c0 && !(cfg->sched_q >= 1.0 && cfg->sched_q <= 16.0))
        bad = "sched_q";
    else if (cfg->flag_publishes != 0 && cfg->flag_publishes != 1)
        bad = "flag_publishes";
    else if (cfg->hot_window
             && (cfg->hot_window < cfg->chunk_size || cfg->hot_window > top / 2))
        bad = "hot_window";
    else if (cfg->max_writes == 1 || cfg->max_writes > RB_WRITES_MAX)
        bad = "max_writes";
    else if (cfg->verify && (cfg->verify != 1 || !cfg->completion_driven
                             || cfg->mode != RB_MODE_PIGGYBACK || cfg->flag_publishes))
        bad = "verify";
    if (what)
        *what = bad;
    return bad ? RDMA_ERR_INVAL : RDMA_OK;
}

static size_t rb_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* x scaled down by top/ring, at least lo. */
static size_t rb_scaled(size_t x, size_t top, size_t ring, size_t lo)
{
    x /= top / ring;
    return x > lo ? x : lo;
}

rb_config_t rb_config_fit(const rb_config_t * cfg, size_t ring)
{
    rb_config_t c = *cfg;
    size_t top = rb_config_top(cfg), chunk = cfg->chunk_size;

    c.ring_size = ring;
    c.max_frame = rb_min(cfg->max_frame, ring / 2);
    c.quiet_frame = (uint32_t) rb_min(cfg->quiet_frame ? cfg->quiet_frame : c.max_frame,
                                      c.max_frame);
    c.credit_threshold = rb_min(cfg->credit_threshold, ring - c.max_frame);
    if (c.sched_c0) {
        c.sched_max = rb_min(rb_scaled(cfg->sched_max, top, ring, chunk), ring / 2);
        c.sched_c0 = rb_min(cfg->sched_c0, c.sched_max);
    }
    if (c.hot_window)
        c.hot_window = rb_min(cfg->hot_window, ring / 2);
    return c;
}

double rb_sched_chunk(size_t c0, double q, size_t max, unsigned i)
{
    double c = rb_sched_next((double) c0, 1.0, max);

    while (i-- > 0 && c < (double) max)
        c = rb_sched_next(c, q, max);
    return c;
}

unsigned rb_sched_count(size_t len, size_t c0, double q)
{
    double sum = 0, c = (double) c0;
    unsigned n = 0;

    while (sum < (double) len) {
        sum += c;
        c *= q;
        n++;
    }
    return n;
}
