/*
 * t_wire: the wire version guard (RDMA_WIRE_VERSION, rdma_xport.h).
 * Builds connect only at the same version, so a change of anything on
 * the wire must change it.  This test fingerprints the wire: the offset
 * and size of every field of the verbs CM message and control words and
 * of the shm region header, mailbox entry, control block and link, the
 * pipe's frame constants, and the bytes the pipe writes for a fixed
 * sequence of frames in each mode.  The fingerprint must be the one
 * recorded for the current version: change the wire, and this fails until
 * RDMA_WIRE_VERSION is raised and the new fingerprint added below.  The
 * fields that carry the version (the verbs CM head, the first words of
 * shm_hdr_t and shm_link_t) are pinned apart: they never move.
 *
 * A new field goes into the lists below too (an unlisted field in padding
 * would escape the offsets; the sizes of the structures are hashed).
 */
#include <stddef.h>
#include <stdio.h>
#include "rdma_shm.h"
#include "pipe_pair.h"
#include "zc.h"
#include "tap.h"

/* Append-only: { version, fingerprint } as printed by this test.  A
 * version may keep its predecessor's fingerprint when what changed is
 * CH3's packets (channel/include/mpidi_ch3_pre.h), which need MPICH's
 * headers: 6 added the rendezvous packets (RDMA_RTS, PUSH, PUSHED, DONE);
 * 7 sends RDMA_RTS over verbs too, with an rkey a 6 would take for CMA's;
 * 8 sends shm frames of 32 KiB by default, which a 7 (16 KiB) refuses;
 * 9: both handshakes carry the frame size (shm also the slot size and mode). */
static const struct {
    int version;
    uint64_t fp;
} recorded[] = {
    {4, UINT64_C(0x52930d05ce5d4de4)},
    {5, UINT64_C(0x269f9a187269dc8)},
    {6, UINT64_C(0x269f9a187269dc8)},
    {7, UINT64_C(0x269f9a187269dc8)},
    {8, UINT64_C(0x269f9a187269dc8)},
    {9, UINT64_C(0xd9e1e7a90bc6e1ab)},
};

/* t_wire_verbs.c (the transports' private headers cannot meet in one
 * file): the verbs fields, or the head only; returns where the head is. */
size_t wire_verbs(void (*mix)(uint64_t), int head_only);

static uint64_t fp;

static void mix(uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8) {
        fp ^= v & 0xff;
        fp *= UINT64_C(0x100000001b3);  /* FNV-1a */
    }
}

#define F(T, f) (mix(offsetof(T, f)), mix(sizeof(((T *) 0)->f)))

static void structs(void)
{
    wire_verbs(mix, 0);
    mix(sizeof(shm_hdr_t));
    F(shm_hdr_t, magic), F(shm_hdr_t, version), F(shm_hdr_t, ring_size);
    F(shm_hdr_t, nslots), F(shm_hdr_t, rank), F(shm_hdr_t, chunk_size), F(shm_hdr_t, max_frame);
    F(shm_hdr_t, head_writes), F(shm_hdr_t, doorbell), F(shm_hdr_t, job);
    F(shm_hdr_t, wake_seq), F(shm_hdr_t, sleeping);
    mix(sizeof(shm_req_t));
    F(shm_req_t, state), F(shm_req_t, pid), F(shm_req_t, region_fd), F(shm_req_t, link_fd);
    F(shm_req_t, nonce), F(shm_req_t, who);
    mix(sizeof(shm_ctl_t));
    F(shm_ctl_t, head), F(shm_ctl_t, tail), F(shm_ctl_t, attached);
    mix(sizeof(shm_link_t));
    F(shm_link_t, magic), F(shm_link_t, version), F(shm_link_t, state), F(shm_link_t, nonce);
    F(shm_link_t, ring_size), F(shm_link_t, ctl);
    mix(SHM_MAGIC), mix(SHM_LINK_MAGIC), mix(SHM_PAGE), mix(SHM_HDR_BYTES), mix(SHM_NREQ);
    mix(SHM_REQ_POSTED), mix(SHM_LINK_ACCEPTED), mix(SHM_LINK_REFUSED), mix(SHM_LINK_CROSSED);
}

/* The frames of a fixed exchange in one pipe mode, as they lie in both
 * rings: data, a control frame, a larger data frame, then (reply) a reply
 * that carries credit. */
static int frames(rb_config_t c, int reply)
{
    char small[5] = "wire", big[300], back[16] = "credit";
    struct iovec iv[1];
    size_t nb, i;
    int sent = 0;

    for (i = 0; i < sizeof(big); i++)
        big[i] = (char) (i * 13);
    if (pair_init(&c))
        return -1;
    iv[0] = (struct iovec) { small, sizeof(small) };
    if (rb_pipe_putv(&A.p, iv, 1, &nb) || rb_pipe_put_ctrl(&A.p, RB_FRAME_CTRL + 6, big, 8, &sent)
        || !sent)
        return -1;
    iv[0] = (struct iovec) { big, sizeof(big) };
    if (rb_pipe_putv(&A.p, iv, 1, &nb))
        return -1;
    for (i = 0; reply && i < 3; i++) {
        const void *v;
        int ty;
        if (rb_pipe_peek(&B.p, &ty, &v, &nb) != 1 || rb_pipe_consume(&B.p, nb))
            return -1;
    }
    iv[0] = (struct iovec) { back, sizeof(back) };
    if (reply && rb_pipe_putv(&B.p, iv, 1, &nb))
        return -1;
    for (i = 0; i < c.ring_size; i++)
        mix(A.ring[i] | (uint64_t) B.ring[i] << 8);
    return 0;
}

int main(void)
{
    rb_config_t pig = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK), basic = pig, shm = pig,
        verify = pig;
    size_t i, last = sizeof(recorded) / sizeof(recorded[0]) - 1;
    uint64_t head;
    size_t at;

    plan(4);
    fp = UINT64_C(0xcbf29ce484222325);
    at = wire_verbs(mix, 1);
    head = fp;
    ok(head == UINT64_C(0x768fe21bdd94b1f3) && at == 0, "the verbs CM head never "
       "changes (fingerprint %#llx)", (unsigned long long) head);
    ok(offsetof(shm_hdr_t, magic) == 0 && offsetof(shm_hdr_t, version) == 8
       && offsetof(shm_link_t, magic) == 0 && offsetof(shm_link_t, version) == 8
       && offsetof(shm_link_t, state) == 16, "the shm words that carry the version never move");

    fp = UINT64_C(0xcbf29ce484222325);
    mix(RB_HDR), mix(RB_FRAME_OVERHEAD), mix(RB_CREDIT_MASK), mix(RB_INFO_QUIET);
    mix(RB_INFO_WRAP), mix(RB_INFO_GROW), mix(RB_FRAME_MOVE), mix(RB_FRAME_SWITCH);
    mix(RB_FRAME_PAD), mix(RB_DESC_MAX), mix(RB_LEN_MAX), mix(RB_VERIFY_MAX);
    mix(RB_ALT_VERIFIED), mix(RB_USER_SEGS);
    mix(ZC_FRAME_REQ), mix(ZC_FRAME_FIN), mix(ZC_FRAME_PUSH), mix(ZC_FRAME_PUSHED);
    mix(ZC_FRAME_BYE);
    structs();
    basic.mode = RB_MODE_BASIC;
    shm.flag_publishes = 1;
    verify.completion_driven = verify.verify = 1;
    ok(frames(pig, 1) == 0 && frames(basic, 1) == 0 && frames(shm, 1) == 0
       && frames(verify, 0) == 0, "a fixed exchange through the pipe in piggyback, basic and "
       "shm modes, and self-verifying frames");
    for (i = 0; i < last; i++)
        if (recorded[i].version >= recorded[i + 1].version)
            break;
    ok(i == last && recorded[last].version == RDMA_WIRE_VERSION && recorded[last].fp == fp,
       "the wire is that of version %d (fingerprint %#llx)", RDMA_WIRE_VERSION,
       (unsigned long long) fp);
    if (recorded[last].version == RDMA_WIRE_VERSION && recorded[last].fp != fp)
        diag("the wire changed: raise RDMA_WIRE_VERSION (channel/src/xport/rdma_xport.h) and "
             "append {%d, UINT64_C(%#llx)} to recorded[] in %s", RDMA_WIRE_VERSION + 1,
             (unsigned long long) fp, __FILE__);
    return done_testing();
}
