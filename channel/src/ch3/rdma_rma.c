/*
 * rdma_rma.c -- one-sided operations without the target's CPU: a
 * contiguous MPI_Put or MPI_Get of a predefined type goes as one RDMA write
 * or read (verbs), or one process_vm_writev/readv (CMA, a window over user
 * memory on this node, from RMA_CMA_MIN bytes: rdma_chan_rma), instead of
 * a CH3 message the target must handle.
 *
 * Windows.  Every window's memory is exposed at creation over the open
 * transports (rdma_chan_win_expose: verbs registers it through the window
 * registration cache, under the pinned-memory cap) and every rank's keys
 * are gathered (one allgather beside CH3's own, gather_info).  A dynamic
 * window exposes all of memory over the transports that register nothing
 * (CMA on the node; MPI_Win_attach has no channel hook, and attached
 * memory is the user's to keep attached while peers access it): between
 * nodes its operations stay messages, as do those to a rank whose
 * exposure failed.
 *
 * Operations.  CH3 has no per-operation hook, so the build patches one
 * into its issue loop (channel/patches/ch3-rma-direct.patch,
 * issue_ops_target): MPIDI_CH3_RMA_Issue_direct is asked first for every
 * operation; one that carries the epoch's lock request (the target must
 * grant the lock first) or its end (rdma_rma_ends_epoch) stays a message.
 * It takes a PUT, PUT_IMMED or
 * GET whose origin and target types are predefined and contiguous and
 * whose target range lies in the target's window (any address in a
 * dynamic one), and starts it
 * (rdma_chan_rma) with a request of its own; anything else, or a start
 * the transport refuses for now (queues, registration limits), stays a
 * message (counted: rdma_rma_messages).
 *
 * Completion rules (MPI-3 sec. 11.5).  The request completes when the
 * transport reports the operation done: for a put, once its bytes are in
 * the target's memory (an RDMA write's completion comes with the
 * responder's acknowledgement; a CMA copy is done on return), for a get
 * once they are in ours.  So local and remote completion coincide, and
 * CH3, told the operation needs no flush message (the patch skips its
 * num_ops_flush_not_issued count), completes MPI_Win_flush,
 * flush_local, unlock, fence and PSCW's complete by waiting for the
 * request, as it waits for any operation's.  What the target learns of
 * the epoch's end (UNLOCK, the fence or PSCW counter decrement, a flush
 * on a later message) travels in a CH3 message on the same VC: an
 * operation in flight holds the VC's send queue (MPIDI_CH3I_Sendq_hold),
 * so that message leaves only after the bytes are in place.  The
 * transport gives no ordering between a write and a later frame
 * (rdma_verbs_rma.c), so this wait is what makes the data visible to the
 * target when its MPI_Win_unlock, fence or MPI_Win_wait returns, and to
 * the next holder of the lock.
 */
#include "rdma_glue.h"
#include "mpidrma.h"

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

cvars:
    - name        : MPIR_CVAR_CH3_RDMA_RMA_DIRECT
      category    : CH3
      type        : boolean
      default     : true
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        ch3:rdma: contiguous MPI_Put and MPI_Get of predefined types to
        another node (RDMA write/read) or to a window over user memory on
        this node (CMA) go without the target's CPU; 0: every one-sided
        operation is a CH3 message.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

/* A window's exposure (win->rma).  Written at creation and free; the
 * counters by the issue hook, under the global critical section. */
struct MPIDI_CH3I_win_rma {
    rdma_chan_wh_t wh;          /* ours, for unexpose */
    rdma_chan_wkey_t self;
    uint64_t puts, gets, messages;      /* this window's operations */
    rdma_chan_wkey_t keys[];    /* [comm size]: what each rank exposed */
};

/* gather_info, then expose base over the transports and gather the keys. */
static int rdma_rma_gather_info(void *base, MPI_Aint size, int disp_unit, MPIR_Info * info,
                                MPIR_Comm * comm, MPIR_Win ** win_ptr)
{
    MPIR_Win *win;
    struct MPIDI_CH3I_win_rma *r;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int n = comm->local_size, mpi_errno;

    mpi_errno = MPIDI_CH3U_Win_gather_info(base, size, disp_unit, info, comm, win_ptr);
    MPIR_ERR_CHECK(mpi_errno);
    win = *win_ptr;
    win->rma = NULL;
    if (!MPIR_CVAR_CH3_RDMA_RMA_DIRECT)
        goto fn_exit;
    r = MPL_calloc(1, sizeof(*r) + (size_t) n * sizeof(r->keys[0]), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!r, mpi_errno, MPI_ERR_OTHER, "**nomem");
    rdma_chan_win_expose(&MPIDI_CH3I_chan, base, win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC
                         ? RDMA_CHAN_WIN_ALL : (size_t) size, &r->self, &r->wh);
    win->rma = r;
    mpi_errno = MPIR_Allgather(&r->self, sizeof(r->self), MPI_BYTE, r->keys, sizeof(r->self),
                               MPI_BYTE, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    MPIR_ERR_CHKANDJUMP(errflag, mpi_errno, MPI_ERR_OTHER, "**coll_fail");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPI_Win_free, after its barrier: no peer accesses our memory any more. */
void MPIDI_CH3I_RDMA_win_rma_free(MPIR_Win * win)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;

    if (!r)
        return;
    if (MPIDI_CH3I_chan.cfg.verbose && (r->puts || r->gets || r->messages))
        fprintf(stderr, "[ch3:rdma] rank %d: window %#x: %llu puts and %llu gets direct, "
                "%llu operations as messages\n", MPIDI_CH3I_chan.rank, (unsigned) win->handle,
                (unsigned long long) r->puts, (unsigned long long) r->gets,
                (unsigned long long) r->messages);
    rdma_chan_win_unexpose(&MPIDI_CH3I_chan, &r->self, &r->wh);
    MPL_free(r);
    win->rma = NULL;
}

int MPIDI_CH3I_RDMA_win_rma_init(MPIDI_CH3U_Win_fns_t * win_fns)
{
    win_fns->gather_info = rdma_rma_gather_info;
    return MPI_SUCCESS;
}

/* A predefined type whose elements lie back to back (not a pair type). */
static int rdma_rma_flat(MPI_Datatype t)
{
    MPI_Aint size, extent;

    if (!MPIR_DATATYPE_IS_PREDEFINED(t))
        return 0;
    MPIR_Datatype_get_size_macro(t, size);
    MPIR_Datatype_get_extent_macro(t, extent);
    return size == extent;
}

typedef struct rdma_rma_op {
    int get;
    void *local;
    size_t len;
    uintptr_t raddr;
} rdma_rma_op_t;

/* Can op go direct?  Then *o says what to move. */
static int rdma_rma_direct_op(const MPIDI_RMA_Op_t * op, const MPIR_Win * win, int target,
                              rdma_rma_op_t * o)
{
    uintptr_t base = (uintptr_t) win->basic_info_table[target].base_addr;
    size_t size = (size_t) win->basic_info_table[target].size;
    MPI_Datatype t;
    MPI_Aint esize;

    if (op->pkt.type == MPIDI_CH3_PKT_PUT || op->pkt.type == MPIDI_CH3_PKT_PUT_IMMED) {
        o->get = 0;
        t = op->pkt.put.datatype;
        o->raddr = (uintptr_t) op->pkt.put.addr;
    } else if (op->pkt.type == MPIDI_CH3_PKT_GET) {
        o->get = 1;
        t = op->pkt.get.datatype;
        o->raddr = (uintptr_t) op->pkt.get.addr;
    } else
        return 0;
    if (!rdma_rma_flat(t) || !rdma_rma_flat(op->origin_datatype) || op->origin_count <= 0)
        return 0;
    MPIR_Datatype_get_size_macro(op->origin_datatype, esize);
    o->len = (size_t) esize * (size_t) op->origin_count;
    o->local = op->origin_addr;
    if (win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC)
        return 1;               /* an absolute address in attached memory */
    return o->raddr >= base && o->raddr - base <= size && o->len <= size - (o->raddr - base);
}

/* Would op carry the end of its epoch (FLUSH, UNLOCK, fence's or PSCW's
 * counter decrement)?  CH3 piggybacks those on the last pending operation
 * of a target whose epoch is ending; issued directly, it would carry
 * nothing, and CH3 sends the end separately only from a visit of the
 * window it stops making once no operation is pending (the flush would
 * wait forever).  Such an operation stays a message, with the flag. */
static int rdma_rma_ends_epoch(const MPIDI_RMA_Op_t * op, MPIR_Win * win, int target)
{
    MPIDI_RMA_Target_t *t = NULL;

    if (op->next != NULL || MPIDI_CH3I_Win_find_target(win, target, &t) != MPI_SUCCESS || !t)
        return 0;
    return t->sync.sync_flag == MPIDI_RMA_SYNC_FLUSH || t->sync.sync_flag == MPIDI_RMA_SYNC_UNLOCK
        || t->win_complete_flag;
}

/* Start o on vc's link with a request of its own: *req, or NULL when the
 * transport did not start it. */
static int rdma_rma_start(MPIDI_VC_t * vc, const rdma_rma_op_t * o,
                          const rdma_chan_wkey_t * key, MPIR_Request ** req)
{
    MPIR_Request *q = MPIR_Request_create(MPIR_REQUEST_KIND__RMA);
    int done, mpi_errno = MPI_SUCCESS;

    *req = NULL;
    MPIR_ERR_CHKANDJUMP(!q, mpi_errno, MPI_ERR_OTHER, "**nomemreq");
    if (rdma_chan_rma(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), o->get, o->local, o->len, o->raddr,
                      key, q, &done) != RDMA_OK) {
        MPIR_cc_set(&q->cc, 0);
        MPIR_Request_free(q);
        goto fn_exit;
    }
    MPIR_Request_add_ref(q);    /* one for CH3 (op->single_req), one for completion */
    if (done)
        mpi_errno = MPID_Request_complete(q);
    else
        MPIDI_CH3I_Sendq_hold(vc, q);
    *req = q;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* The patched issue loop (see the top): start op directly if it can go. */
int MPIDI_CH3_RMA_Issue_direct(MPIDI_RMA_Op_t * op, MPIR_Win * win, int target, int lock,
                               int *direct)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    MPIR_Request *req = NULL;
    MPIDI_VC_t *vc;
    rdma_rma_op_t o;
    int mpi_errno = MPI_SUCCESS;

    *direct = 0;
    if (r && !lock && target != win->comm_ptr->rank && rdma_rma_direct_op(op, win, target, &o)
        && !rdma_rma_ends_epoch(op, win, target)) {
        MPIDI_Comm_get_vc_set_active(win->comm_ptr, target, &vc);
        mpi_errno = rdma_rma_start(vc, &o, &r->keys[target], &req);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (req) {
        op->single_req = req;
        op->reqs_size = 1;
        *direct = 1;
        if (o.get)
            r->gets++;
        else
            r->puts++;
    } else {
        rdma_chan_rma_message(&MPIDI_CH3I_chan);
        if (r)
            r->messages++;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* owner.rma_done: the transport finished a direct operation, or the read
 * of a rendezvous. */
void MPIDI_CH3I_RDMA_rma_done(void *arg, rdma_link_t * l, void *cookie, rdma_status_t st)
{
    MPIR_Request *req = cookie;

    (void) arg;
    if (req->kind == MPIR_REQUEST_KIND__RECV) {
        MPIDI_CH3I_Rndv_read_done(l, req, st);  /* a rendezvous' read (rdma_rndv.c) */
        return;
    }
    if (st != RDMA_OK)
        req->status.MPI_ERROR = MPIDI_CH3I_RDMA_peer_errno(l->xc.why);
    MPID_Request_complete(req);
}
