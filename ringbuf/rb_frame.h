/*
 * rb_frame.h: the frame rules (rb_pipe.h, "Frame layout"), inline, in one
 * place for both paths through the pipe: the general one (rb_pipe.c send
 * side, rb_rx.c receive side, rb_grow.c) and the small-message one that
 * rb_pipe.h inlines into its callers (rb_pipe_put_small, rb_pipe_view,
 * rb_pipe_view_done).  Memory ordering is noted where it is carried:
 * rb_tx_frame (release of the head flag, which also orders rb_tx_stale's
 * zero), rb_rx_release (relaxed clears, ordered by the credit's release);
 * the acquire side is rb_rx.c's rb_rx_parse and rb_rx_parse_express
 * below.  Internal to the pipe: only rb_pipe.h includes it.
 */
#ifndef RB_FRAME_H_INCLUDED
#define RB_FRAME_H_INCLUDED

#include <string.h>

#define RB_HDR 16               /* flag + info */

static inline size_t rb_pad8(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

/* c: the direction's geometry, p->tx.cfg or p->rx.cfg */
static inline size_t rb_ring_off(const rb_config_t * c, uint64_t pos)
{
    return pos & (c->ring_size - 1);
}

/* Ring bytes covered by a frame at ring offset off: whole chunks, or up to
 * the ring end for a PAD frame.  Sender and receiver both use this (a
 * SWITCH frame's span is rb_switch_span's). */
static inline uint64_t rb_frame_span(const rb_pipe_t * p, const rb_config_t * c, size_t off,
                                     int type, size_t len)
{
    size_t k = c->chunk_size;

    if (type == RB_FRAME_PAD)
        return c->ring_size - off;
    return (p->ovh + rb_pad8(len) + k - 1) & ~(uint64_t) (k - 1);
}

/* rb_frame_span of a frame with info word info: to the ring end if it ends
 * the lap (RB_INFO_WRAP). */
static inline uint64_t rb_frame_span_info(const rb_pipe_t * p, const rb_config_t * c, size_t off,
                                          int type, size_t len, uint64_t info)
{
    return info & RB_INFO_WRAP ? c->ring_size - off : rb_frame_span(p, c, off, type, len);
}

/* A SWITCH frame at position pos spans up to the next multiple of the new
 * ring's size: the new ring starts empty at its offset 0. */
static inline uint64_t rb_switch_span(uint64_t pos, size_t size)
{
    return size - (pos & (size - 1));
}

/* rb_check's round (xxHash64's): a bijection of h for a fixed w, and of w
 * for a fixed h. */
static inline uint64_t rb_check_round(uint64_t h, uint64_t w)
{
    h += w * UINT64_C(0xC2B2AE3D27D4EB4F);
    h = h << 31 | h >> 33;
    return h * UINT64_C(0x9E3779B185EBCA87);
}

/* The tail word of a frame at position pos on a verifying pipe (rb_pipe.h,
 * "Self-verifying frames"): over its position, flag, info and the n words
 * at w (its payload for a verified frame, none for another).  A frame read
 * with one word other than written never matches (every round and the
 * final mix are bijections); more words differ: a match by chance, about
 * 2^-64 per torn read.  Position and seq make a stale frame of an earlier
 * lap differ too. */
static inline uint64_t rb_check(uint64_t pos, uint64_t flag, uint64_t info,
                                const volatile uint64_t * w, size_t n)
{
    uint64_t h = rb_check_round(rb_check_round(rb_check_round(0, pos), flag), info);
    size_t i;

    for (i = 0; i < n; i++)
        h = rb_check_round(h, w[i]);
    h ^= h >> 33;
    h *= UINT64_C(0xC2B2AE3D27D4EB4F);
    h ^= h >> 29;
    h *= UINT64_C(0x165667B19E3779F9);
    return h ^ h >> 32;
}

/* seq skips 0: a flag word that landed only in part (unwritten bytes still
 * 0) can then never carry the expected seq (see rb_rx_parse). */
static inline uint32_t rb_seq_next(uint32_t seq)
{
    return seq + 1 ? seq + 1 : 1;
}

/* A flag word's payload length. */
static inline size_t rb_flag_len(uint64_t flag)
{
    return flag >> 2 & RB_LEN_MAX;
}

/* Position t is after `after` and not beyond what was sent. */
static inline int rb_tx_ahead(const rb_pipe_t * p, uint64_t after, uint64_t t)
{
    return (int64_t) (t - after) > 0 && (int64_t) (p->tx.head - t) >= 0;
}

/* t is a peer tail ahead of the replica (and sent). */
static inline int rb_tail_newer(const rb_pipe_t * p, uint64_t t)
{
    return rb_tx_ahead(p, p->tx.tail, t);
}

/* The peer credited t (tail word or piggyback): the window's rule. */
static inline void rb_tx_credit(rb_pipe_t * p, uint64_t t)
{
    if (rb_tx_ahead(p, p->tx.credit, t))
        p->tx.credit = t;
}

/* Out of line (rb_pipe.c, rb_rx.c). */
int rb_tx_window_retire(rb_pipe_t * p, unsigned n);
rdma_status_t rb_rx_credit(rb_pipe_t * p);

/* ---- send side ---- */

/* Room in the write window (rb_pipe.h) for n more writes; always with no
 * window. */
static inline int rb_tx_window(rb_pipe_t * p, unsigned n)
{
    unsigned w = p->tx.cfg.max_writes;

    return !w || p->tx.win_in - p->tx.win_out + n <= w || rb_tx_window_retire(p, n);
}

static inline uint64_t rb_tx_room(const rb_pipe_t * p)
{
    return p->tx.cfg.ring_size - (p->tx.head - p->tx.tail);
}

/* Payload area of the next frame, its last partial word zeroed (pad8). */
static inline uint8_t *rb_tx_payload(rb_pipe_t * p, size_t len)
{
    uint8_t *d = p->tx.stage + rb_ring_off(&p->tx.cfg, p->tx.head) + RB_HDR;

    if (len & 7)
        *(uint64_t *) (d + (len & ~(size_t) 7)) = 0;
    return d;
}

/* One transport write of len ring bytes at off holding `frames` frames,
 * u non-NULL: their payload parts from user memory (then, in basic mode,
 * the head). */
static inline rdma_status_t rb_tx_write(rb_pipe_t * p, size_t off, size_t len,
                                        unsigned frames, const rb_user_t * u)
{
    p->stats.writes_tx++;
    if (p->tx.cfg.max_writes)   /* it ends at tx.head: frames are built first */
        p->win_end[p->tx.win_in++ % RB_WRITES_MAX] = p->tx.head;
    if ((u ? p->ops->write_user(p->ctx, off, len, frames, u)
         : p->ops->write(p->ctx, off, len, frames))
        || (p->tx.cfg.mode == RB_MODE_BASIC && p->ops->head(p->ctx, p->tx.head)))
        return RDMA_ERR_XPORT;
    return RDMA_OK;
}

/* Lazy pipes (rb_pipe_t.lazy), before the frame of `wrote` bytes at ring
 * offset off, spanning span, is published: the receiver will clear its
 * flag word, and all its chunk words if it has at most RB_CLEAR_ALL
 * chunks; a larger frame leaves the others stale.  The word where the next
 * frame starts, if stale, is zeroed now (the flag's release orders it):
 * having read this frame's flag, the receiver reads 0 or the next flag
 * there, never old bytes.  A stale word is inside an older frame, so
 * consumed already: frames tile each lap and this one's bytes are
 * consumed; a word not known consumed is an older frame's start.  Out of
 * line (rb_pipe.c), and only for frames at or past the lowest stale chunk
 * (rb_tx_stale_near): the first small frame sent to an empty ring after a
 * large one zeroes the stale words of the hot window (all consumed), so
 * small messages alone never pay for it. */
void rb_tx_stale(rb_pipe_t * p, size_t off, uint64_t wrote, uint64_t span);

/* Whether that frame needs rb_tx_stale: it is large, or it or the word
 * where the next frame starts lies at or past the lowest stale chunk. */
static inline int rb_tx_stale_near(const rb_pipe_t * p, size_t off, uint64_t wrote,
                                   uint64_t span)
{
    size_t from = (size_t) p->stale_from * p->tx.cfg.chunk_size;

    return wrote > RB_CLEAR_ALL * p->tx.cfg.chunk_size || off + wrote > from
        || rb_ring_off(&p->tx.cfg, p->tx.head + span) >= from;
}

/* A frame of len payload bytes goes out self-verifying (rb_pipe.h): on a
 * verifying pipe, at most RB_VERIFY_MAX bytes, payload in the stage (not
 * user: part of it in the caller's memory). */
static inline int rb_tx_verified(const rb_pipe_t * p, size_t len, int user)
{
    return p->tail_kind == RB_TAIL_CHECK && !user && p->ovh + rb_pad8(len) <= RB_VERIFY_MAX;
}

/* Verifying pipe: the frame at f (tx.head) with this flag and info gets
 * its tail word; returns the flag, its alt RB_ALT_VERIFIED for a frame
 * rb_tx_verified.  Out of line (rb_pipe.c), like rb_rx_verified and
 * rb_tx_commit_check, so that the inline paths shared memory runs carry
 * none of the check code (inlined, it added 16 instructions to each
 * shared-memory send, callgrind). */
uint64_t rb_tx_check(rb_pipe_t * p, uint8_t * f, uint64_t flag, uint64_t info, size_t len,
                     int user);

/* Has a frame come back since our last one went out (a ping-pong, not a
 * one-way stream)? */
static inline int rb_tx_answered(const rb_pipe_t * p)
{
    return p->rx.consumed != p->quiet_rx;
}

/* A frame waits behind the one at rx.tail (which a handler may be
 * answering in place, or which is pending): the peer sent on without
 * waiting for our answer, a burst of requests.  (Asking for two behind
 * raced with the burst's sender: a target answering the second get of a
 * lock epoch often found only the third, docs/results/rma.md.)  Words of
 * our own ring, read plainly: a stale or torn one only decides where an
 * answer goes (rb_tx_streams, rb_tx_lap_ends), never what is read. */
static inline int rb_rx_queued(const rb_pipe_t * p)
{
    const rb_config_t *c = &p->rx.cfg;
    size_t off = rb_ring_off(c, p->rx.tail);
    volatile const uint64_t *fr = (volatile const uint64_t *) (p->rx.ring + off);
    uint64_t flag = fr[0], info = fr[1];

    if (!flag || (uint32_t) (flag >> 32) != p->rx.seq)
        return 0;
    off = rb_ring_off(c, p->rx.tail + rb_frame_span_info(p, c, off, (int) (info >> 56),
                                                          rb_flag_len(flag), info));
    flag = *(volatile const uint64_t *) (p->rx.ring + off);
    return flag && (uint32_t) (flag >> 32) == rb_seq_next(p->rx.seq);
}

/* Lazy pipes: a frame of two chunks sent to an empty ring after a frame
 * came back (a ping-pong's small message) is quiet, RB_INFO_QUIET: its
 * receiver clears only its flag word, and its second chunk's word stays
 * stale.  On host G the receiver's store to that line cost 15% of an
 * 8-byte round trip; in a stream leaving it measured 0.63x the message
 * rate, and a stream's receiver that keeps up empties the ring too
 * (docs/results/shm.md). */
static inline uint64_t rb_tx_quiet(const rb_pipe_t * p, uint64_t wrote)
{
    size_t k = p->tx.cfg.chunk_size;

    return p->lazy && p->tx.head == p->tx.tail && rb_tx_answered(p)
        && wrote > k && wrote <= 2 * k ? RB_INFO_QUIET : 0;
}

/* Lazy pipes, before the frame of `wrote` bytes at ring offset off,
 * spanning span, is published: the word the last quiet frame left stale
 * (quiet_stale) is zeroed if this frame ends there (the receiver polls it
 * next; its frame was consumed, as this one lies over its first chunk).
 * The flag's release orders the zero.  A frame over it takes it over: its
 * flag, or a word the receiver clears or rb_tx_stale tracks.  One word,
 * not stale[]: with quiet frames in the bitmap, every later frame took
 * rb_tx_stale's out-of-line upkeep and sweeps (8 B 0.90 instead of 0.87
 * of the time, streams of 128-512 B 0.82x the bandwidth, host G). */
static inline void rb_tx_quiet_stale(rb_pipe_t * p, size_t off, uint64_t wrote, uint64_t span)
{
    size_t w = p->quiet_stale - 1;

    if (w - off < wrote)
        p->quiet_stale = 0;
    else if (w == rb_ring_off(&p->tx.cfg, p->tx.head + span)) {
        __atomic_store_n((uint64_t *) (p->tx.stage + w), 0, __ATOMIC_RELAXED);
        p->quiet_stale = 0;
    }
}

/* After a quiet frame at ring offset off is published: the older stale
 * word, if any, is zeroed, so that one at most is stale (the ring was
 * empty: its frame is consumed; a frame that ends there later orders
 * this store by its flag's release), and this frame's is recorded.
 * After the flag: nothing needs the zero sooner, and the store, to a line
 * the receiver holds, then does not hold the flag back. */
static inline void rb_tx_quiet_mark(rb_pipe_t * p, size_t off)
{
    if (p->quiet_stale)
        __atomic_store_n((uint64_t *) (p->tx.stage + p->quiet_stale - 1), 0, __ATOMIC_RELAXED);
    p->quiet_stale = off + p->tx.cfg.chunk_size + 1;
}

/* rb_tx_frame's at: RB_TX_NOCHECK where the caller knows the pipe does
 * not verify (no check code inlined), else where the payload is. */
enum { RB_TX_NOCHECK = 0, RB_TX_STAGE = 1, RB_TX_USER = 2 };

/* Complete the frame whose payload is in place at tx.head and publish it
 * in the stage; returns its ring offset.  Space was checked by the
 * caller. */
static inline __attribute__ ((always_inline))
size_t rb_tx_frame(rb_pipe_t * p, int type, size_t len, int at)
{
    size_t off = rb_ring_off(&p->tx.cfg, p->tx.head);
    uint8_t *f = p->tx.stage + off;
    uint64_t *tailp = (uint64_t *) (f + RB_HDR + rb_pad8(len));
    uint64_t flag = (uint64_t) p->tx.seq << 32 | (uint64_t) len << 2 | 1;
    uint64_t quiet = rb_tx_quiet(p, p->ovh + rb_pad8(len));
    uint64_t info = (p->tx.cfg.mode == RB_MODE_BASIC ? 0 : p->rx.tail & RB_CREDIT_MASK)
        | quiet | p->tx.ask | p->tx.wrap | (uint64_t) type << 56;
    uint64_t span = type == RB_FRAME_SWITCH ? rb_switch_span(p->tx.head, p->tx.move.size)
        : rb_frame_span_info(p, &p->tx.cfg, off, type, len, info);

    ((uint64_t *) f)[1] = info;
    p->tx.ask = p->tx.wrap = 0;
    /* The receiver's word at the tail position is 0 or what our stage holds
     * there: make the tail flag differ from it (alt 1 -> 2).  Without a tail
     * flag this read is skipped; on shm it would fetch a line the peer
     * holds before the frame can be published. */
    if (p->tail_kind == RB_TAIL_FLAG) {
        if (*tailp == flag)
            flag ^= 3;
        *tailp = flag;
    } else if (at && p->tail_kind == RB_TAIL_CHECK)
        flag = rb_tx_check(p, f, flag, info, len, at == RB_TX_USER);
    if (p->lazy && rb_tx_stale_near(p, off, p->ovh + rb_pad8(len), span))
        rb_tx_stale(p, off, p->ovh + rb_pad8(len), span);
    if (p->quiet_stale)
        rb_tx_quiet_stale(p, off, p->ovh + rb_pad8(len), span);
    /* release: payload, info, tail flag and a stale word's zero before the
     * head flag (for shm, whose stage is the peer's ring, this store
     * publishes the frame: the receiver copies it out while we build the
     * next sub-block) */
    __atomic_store_n((uint64_t *) f, flag, __ATOMIC_RELEASE);
    if (quiet)
        rb_tx_quiet_mark(p, off);
    p->quiet_rx = p->rx.consumed;
    p->tx.head += span;
    p->tx.seq = rb_seq_next(p->tx.seq);
    p->stats.frames_tx++;
    p->stats.bytes_tx += len;
    p->tx.hot_bytes = (off ? p->tx.hot_bytes : 0) + p->ovh + len;
    if (p->tx.cfg.mode != RB_MODE_BASIC) {      /* piggybacked */
        p->rx.tail_sent = p->rx.tail;
        p->rx.consumed_sent = p->rx.consumed;
    }
    return off;
}

/* One-way streams of larger frames ignore the hot window: a frame of
 * `bytes` over hot_window/32, not answered (rb_tx_answered) or answering
 * one of a burst (rb_rx_queued).  A stream's receiver that keeps up
 * empties the ring before each message, so rewinds and lap ends there held
 * the sender to a few frames ahead, each past the window taking the slow
 * path to read the tail (1 KiB messages at 0.52x the rate,
 * docs/results/shm.md; a burst's answers likewise, docs/results/rma.md);
 * small frames keep the window, whose warm lines they gain more from. */
static inline int rb_tx_streams(const rb_pipe_t * p, uint64_t bytes)
{
    return bytes > p->tx.cfg.hot_window / 32 && (!rb_tx_answered(p) || rb_rx_queued(p));
}

/* A frame of `bytes` at ring offset off would lie past the hot window (by
 * offset, or by the frame bytes written since offset 0). */
static inline int rb_tx_past_hot(const rb_pipe_t * p, size_t off, uint64_t bytes)
{
    return p->tx.cfg.hot_window && off
        && (off >= p->tx.cfg.hot_window || p->tx.hot_bytes >= p->tx.cfg.hot_window / 4)
        && !rb_tx_streams(p, bytes);
}

/* A one-frame message of len bytes to a ring the sender knows to be empty
 * that ends at or past the lap mark (hot_window/32) ends the lap, if it
 * leaves room for one more such frame (its offset) until it is consumed.
 * Not in a stream, nor, of any size, answering one of a burst
 * (rb_rx_queued): the answers to the rest would have that room only, and
 * its sender stalls until a credit comes. */
static inline int rb_tx_lap_ends(const rb_pipe_t * p, size_t len)
{
    size_t off = rb_ring_off(&p->tx.cfg, p->tx.head);
    uint64_t bytes = p->ovh + rb_pad8(len);

    return p->tx.cfg.hot_window && p->tx.head == p->tx.tail
        && off >= rb_frame_span(p, &p->tx.cfg, off, RB_FRAME_DATA, len)
        && off + bytes >= p->tx.cfg.hot_window / 32
        && (bytes <= p->tx.cfg.hot_window / 32 || rb_tx_answered(p)) && !rb_rx_queued(p);
}

/* The common small message: all of it fits in one frame at tx.head now
 * (room by the replica, before the ring end, no group pending, inside the
 * hot window if there is one -- or, a frame over hot_window/4 on its own,
 * past the window's frame bytes but starting inside it, where it ends the
 * lap after a message that also found the ring empty: a ping-pong of such
 * frames then takes two slots instead of a PAD and offset 0 per message,
 * while neither the first message of a burst nor a small one before
 * streamed data leaves the rest only its offset of room).  rb_pipe_putv's
 * loop would build exactly that frame.  A frame past quiet_frame is left
 * to the loop, which reads the tail afresh to size it. */
static inline int rb_tx_one_fits(rb_pipe_t * p, size_t len)
{
    size_t off = rb_ring_off(&p->tx.cfg, p->tx.head);
    uint64_t span = rb_frame_span(p, &p->tx.cfg, off, RB_FRAME_DATA, len);

    return len && span <= p->tx.cfg.quiet_frame && off + span <= p->tx.cfg.ring_size
        && span <= rb_tx_room(p) && !p->tx.wr_frames
        && (!rb_tx_past_hot(p, off, p->ovh + rb_pad8(len))
            || (p->tx.quiet && span > p->tx.cfg.hot_window / 4 && off < p->tx.cfg.hot_window
                && rb_tx_lap_ends(p, len)))
        && rb_tx_window(p, 1);
}

/* rb_tx_commit, at RB_TX_NOCHECK (a pipe that does not verify) or
 * RB_TX_STAGE. */
static inline __attribute__ ((always_inline))
rdma_status_t rb_tx_commit_as(rb_pipe_t * p, size_t len, int at)
{
    int rc;

    p->tx.quiet = p->tx.head == p->tx.tail;
    if (rb_tx_lap_ends(p, len)) {
        p->tx.wrap = RB_INFO_WRAP;
        p->stats.wraps++;
    }
    rc = rb_tx_write(p, rb_tx_frame(p, RB_FRAME_DATA, len, at), p->ovh + rb_pad8(len),
                     !(at && rb_tx_verified(p, len, 0)), NULL);

    p->tx.wr_target = (double) p->tx.cfg.sched_c0; /* the message is complete */
    return rc;
}

/* rb_tx_commit_as on a verifying pipe, out of line (rb_pipe.c). */
rdma_status_t rb_tx_commit_check(rb_pipe_t * p, size_t len);

/* The one DATA frame of len bytes rb_tx_one_fits found room for, its
 * payload in place (rb_tx_payload): publish and write it. */
static inline __attribute__ ((always_inline))
rdma_status_t rb_tx_commit(rb_pipe_t * p, size_t len)
{
    if (__builtin_expect(p->tail_kind == RB_TAIL_CHECK, 0))
        return rb_tx_commit_check(p, len);
    return rb_tx_commit_as(p, len, RB_TX_NOCHECK);
}

/* Send the iov as the one frame rb_tx_one_fits found room for. */
static inline rdma_status_t rb_tx_one(rb_pipe_t * p, const struct iovec *iov, int n,
                                      size_t len, size_t * nbytes)
{
    uint8_t *d = rb_tx_payload(p, len);
    int i, rc;

    for (i = 0; i < n; d += iov[i++].iov_len)
        memcpy(d, iov[i].iov_base, iov[i].iov_len);
    rc = rb_tx_commit(p, len);
    *nbytes = rc == RDMA_OK ? len : 0;
    return rc;
}

/* ---- receive side ---- */

/* A flag with the expected seq that no sender writes: bad alt, a frame
 * larger than max_frame or past the ring end. */
static inline int rb_rx_flag_bad(const rb_pipe_t * p, uint64_t flag, size_t off, size_t len)
{
    size_t bytes = p->ovh + rb_pad8(len);

    return (flag & 3) == 0 || (flag & 3) == 3 || bytes > p->rx.cfg.max_frame
        || off + bytes > p->rx.cfg.ring_size;
}

/* Verifying pipe: the frame at rx.tail (fr, ring offset off), its flag
 * read with the expected seq, is complete (rb_rx.c).  1 or 0. */
int rb_rx_verified(rb_pipe_t * p, volatile const uint8_t * fr, uint64_t flag, size_t off,
                   size_t len);

/* Piggyback mode: the frame's info word carries the peer's receive tail
 * (56-bit credit): rebuild the full tail, which lies within a ring of
 * tx.head. */
static inline void rb_rx_credit_in(rb_pipe_t * p, uint64_t info)
{
    uint64_t t = p->tx.head - ((p->tx.head - info) & RB_CREDIT_MASK);

    if (rb_tail_newer(p, t))
        p->tx.tail = t;
    rb_tx_credit(p, t);
}

/* Release the frame at rx.tail: clear the chunk-start words its bytes cover
 * (so they read as "no frame" when reused; the rest of a PAD frame's span
 * was never written), on a lazy pipe only the flag word of a frame over
 * RB_CLEAR_ALL chunks (rb_tx_stale) or of a quiet one (rb_tx_quiet);
 * advance, and return credit when due. */
static inline rdma_status_t rb_rx_release(rb_pipe_t * p, const rb_frame_t * f)
{
    volatile uint8_t *r = p->rx.ring + rb_ring_off(&p->rx.cfg, p->rx.tail);
    uint64_t c, wrote = p->ovh + rb_pad8(f->len);

    if (p->lazy && (wrote > RB_CLEAR_ALL * p->rx.cfg.chunk_size || f->quiet))
        wrote = 1;
    /* relaxed: the credit's release store (ops->credit, or the head flag
     * of the next frame that piggybacks it) orders these before reuse */
    for (c = 0; c < wrote; c += p->rx.cfg.chunk_size)
        __atomic_store_n((volatile uint64_t *) (r + c), 0, __ATOMIC_RELAXED);
    p->rx.tail += f->span;
    p->rx.seen.span = 0;
    p->rx.off = 0;
    p->rx.seq = rb_seq_next(p->rx.seq);
    p->rx.consumed++;
    p->stats.frames_rx++;
    if (p->rx.cfg.mode == RB_MODE_BASIC
        || p->rx.tail - p->rx.tail_sent >= p->rx.cfg.credit_threshold
        || (p->rx.cfg.max_writes && p->rx.consumed - p->rx.consumed_sent
            >= p->rx.cfg.max_writes / 2))
        return rb_rx_credit(p);
    return RDMA_OK;
}

/* n more payload bytes of the frame at rx.tail are consumed; a frame
 * consumed whole is released. */
static inline rdma_status_t rb_rx_advance(rb_pipe_t * p, const rb_frame_t * f, size_t n)
{
    p->rx.off += n;
    p->stats.bytes_rx += n;
    return p->rx.off == f->len ? rb_rx_release(p, f) : RDMA_OK;
}

/* Acquire barrier between "frame complete" and the payload reads.  A NIC
 * may have written the ring, so use rdma-core's udma_from_device_barrier
 * where the C11 fence is not enough for device writes. */
#if defined(__x86_64__)
#define RB_RX_BARRIER() __asm__ volatile("lfence" ::: "memory")
#elif defined(__aarch64__)
#define RB_RX_BARRIER() __asm__ volatile("dmb oshld" ::: "memory")
#else
#define RB_RX_BARRIER() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* A tail-flag frame's tail word (RB_TAIL_FLAG), of a frame whose flag,
 * len payload bytes, was checked valid; acquire: the frame is complete
 * once it equals the head flag (the barrier after it orders the rest). */
static inline uint64_t rb_rx_tail_word(volatile const uint8_t * fr, size_t len)
{
    return __atomic_load_n((volatile const uint64_t *) (fr + RB_HDR + rb_pad8(len)),
                           __ATOMIC_ACQUIRE);
}

/* rb_rx_parse for express pipes (rb_pipe_t.express, passed as kind), the
 * common frame only: a complete DATA frame at rx.tail, nothing of it
 * consumed, no grow asked, no grow work owed.  RB_PEEK_READY: *buf,
 * *len view its payload; _NONE: nothing has arrived; _SLOW: anything
 * else, for rb_rx_parse to judge.  The flag's acquire load orders the info and payload reads
 * (RB_EXPRESS_FLAG); an RB_EXPRESS_TAIL frame is complete once its tail
 * flag equals its head flag (a valid one: the length locates the tail),
 * and the barrier after that read orders the rest (as in rb_rx_parse); on
 * an RB_EXPRESS_LANDED pipe the caller has seen the frame land (its
 * completion made the write visible) or, verifying, may have
 * (rb_rx_verified decides), and takes only 1. */
static inline __attribute__ ((always_inline))
rb_peek_t rb_rx_parse_express(rb_pipe_t * p, const void **buf, size_t *len, int kind)
{
    size_t off = rb_ring_off(&p->rx.cfg, p->rx.tail), n;
    volatile uint8_t *fr = p->rx.ring + off;
    uint64_t flag, info;

    if (p->pend || p->rx.off)
        return RB_PEEK_SLOW;
    flag = __atomic_load_n((volatile uint64_t *) fr, __ATOMIC_ACQUIRE);
    if (flag == 0)
        return RB_PEEK_NONE;
    n = rb_flag_len(flag);
    if (kind == RB_EXPRESS_TAIL) {
        if ((uint32_t) (flag >> 32) != p->rx.seq || rb_rx_flag_bad(p, flag, off, n))
            return RB_PEEK_SLOW;
        if (rb_rx_tail_word(fr, n) != flag)
            return RB_PEEK_NONE;
        RB_RX_BARRIER();
    }
    info = ((volatile uint64_t *) fr)[1];
    /* type DATA (0) and no RB_INFO_GROW: bits 55..63 clear */
    if ((uint32_t) (flag >> 32) != p->rx.seq || rb_rx_flag_bad(p, flag, off, n) || info >> 55
        || (kind == RB_EXPRESS_LANDED && p->tail_kind == RB_TAIL_CHECK
            && !rb_rx_verified(p, fr, flag, off, n)))
        return RB_PEEK_SLOW;
    rb_rx_credit_in(p, info);
    *buf = (const void *) (fr + RB_HDR);
    *len = n;
    return RB_PEEK_READY;
}

/* The whole DATA frame of len bytes at ring offset off (rx.tail), info its
 * info word, none of it consumed before, is consumed now. */
static inline rdma_status_t rb_rx_advance_data(rb_pipe_t * p, size_t off, size_t len, uint64_t info)
{
    rb_frame_t f;

    f.len = len;
    f.quiet = !!(info & RB_INFO_QUIET);
    f.span = rb_frame_span_info(p, &p->rx.cfg, off, RB_FRAME_DATA, len, info);
    return rb_rx_advance(p, &f, len);
}

#endif /* RB_FRAME_H_INCLUDED */
