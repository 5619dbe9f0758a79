/*
 * t_wire_verbs.c: the verbs side of t_wire's fingerprint (rdma_verbs.h
 * and rdma_shm.h each define struct rdma_xport: one per file).
 */
#include <stddef.h>
#include "rdma_verbs.h"

#define F(T, f) (mix(offsetof(T, f)), mix(sizeof(((T *) 0)->f)))

size_t wire_verbs(void (*mix)(uint64_t), int head_only);

/* The head (never changes) or every field of the CM message, its type
 * values, the immediate kinds and the control words peers write. */
size_t wire_verbs(void (*mix)(uint64_t), int head_only)
{
    F(rdma_verbs_head_t, magic), F(rdma_verbs_head_t, version), F(rdma_verbs_head_t, auth);
    F(rdma_verbs_head_t, src_auth), F(rdma_verbs_head_t, token), F(rdma_verbs_head_t, echo);
    F(rdma_verbs_head_t, gid), F(rdma_verbs_head_t, udqpn), F(rdma_verbs_head_t, qkey);
    F(rdma_verbs_head_t, lid), F(rdma_verbs_head_t, type), F(rdma_verbs_head_t, dyn);
    F(rdma_verbs_head_t, pid), F(rdma_verbs_head_t, host);
    mix(RDMA_VERBS_MSG_REQ), mix(RDMA_VERBS_MSG_REJ);
    if (head_only)
        return offsetof(rdma_verbs_msg_t, h);
    mix(sizeof(rdma_verbs_head_t)), mix(sizeof(rdma_verbs_msg_t));
    F(rdma_verbs_msg_t, h), F(rdma_verbs_msg_t, src), F(rdma_verbs_msg_t, dst);
    F(rdma_verbs_msg_t, qpn), F(rdma_verbs_msg_t, psn), F(rdma_verbs_msg_t, ring_addr);
    F(rdma_verbs_msg_t, ctl_addr), F(rdma_verbs_msg_t, ring_rkey), F(rdma_verbs_msg_t, ctl_rkey);
    F(rdma_verbs_msg_t, ring_size), F(rdma_verbs_msg_t, chunk_size);
    F(rdma_verbs_msg_t, ring_max), F(rdma_verbs_msg_t, max_frame), F(rdma_verbs_msg_t, in_order);
    F(rdma_verbs_msg_t, rd_atomic), F(rdma_verbs_msg_t, basic), F(rdma_verbs_msg_t, mtu);
    F(rdma_verbs_msg_t, hello);
    mix(RDMA_VERBS_MSG_REP), mix(RDMA_VERBS_MSG_RTU), mix(RDMA_VERBS_MSG_WAIT), mix(RDMA_VERBS_MAGIC);
    mix(RDMA_VERBS_IMM_FRAME), mix(RDMA_VERBS_IMM_CREDIT), mix(RDMA_VERBS_IMM_HEAD);
    mix(sizeof(rdma_verbs_ctl_t));
    F(rdma_verbs_ctl_t, head_word), F(rdma_verbs_ctl_t, tail_word);
    return offsetof(rdma_verbs_msg_t, h);
}
