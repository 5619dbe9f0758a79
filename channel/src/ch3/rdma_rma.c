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
 * (CMA on the node).  Between nodes its memory is registered only with
 * the info key coll_attach=true (MPICH's hint, as ch4:ofi reads it: every
 * rank calls MPI_Win_attach and MPI_Win_detach together): then each
 * attach registers the region and gathers every rank's {base, len, keys}
 * into a per-rank address-range tree (MPL_gavl), and each detach drops
 * them everywhere before the owner deregisters, so no origin keeps a key
 * to memory that was unregistered (a write with a stale rkey would break
 * the connection) or re-registered.  Without the hint a detach is local
 * and no peer would hear of it, so operations across nodes stay
 * messages, as do those to a rank whose exposure failed (ch4:ucx keeps
 * every dynamic window on messages).
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
 * message (counted: rdma_rma_messages).  Messages carry the epoch's
 * synchronisation where they can: the patch makes CH3 keep the last
 * operation back until the next one or the synchronisation call
 * (MPIR_CVAR_CH3_RMA_DELAY_ISSUING_FOR_PIGGYBACKING defaults to 1 in this
 * build), so that lock, operation and unlock, or an accumulate and its
 * flush, travel as one message; MPIDI_CH3_RMA_Op_hold says which
 * operations wait.
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

/* A region attached to a dynamic window with coll_attach (the value in
 * its owner's tree); own: ours, wh releases it. */
typedef struct rdma_rma_region {
    rdma_chan_wkey_t key;
    rdma_chan_wh_t wh;
    int own;
} rdma_rma_region_t;

/* What an attach gathers from each rank. */
typedef struct rdma_rma_attach {
    uint64_t base, len;
    rdma_chan_wkey_t key;
} rdma_rma_attach_t;

/* A window's exposure (win->rma).  Written at creation, attach, detach and
 * free; the counters by the issue hook; all under the global critical
 * section (MPL_gavl is not thread-safe). */
struct MPIDI_CH3I_win_rma {
    rdma_chan_wh_t wh;          /* ours, for unexpose */
    rdma_chan_wkey_t self;
    uint64_t puts, gets, messages;      /* this window's operations */
    MPL_gavl_tree_t *attached;  /* [comm size] or NULL (no coll_attach): regions */
    rdma_chan_wkey_t keys[];    /* [comm size]: what each rank exposed */
};

/* The tree's free_fn: a region of ours is unexposed as it leaves. */
static void rdma_rma_region_free(void *v)
{
    rdma_rma_region_t *g = v;

    if (g->own)
        rdma_chan_win_unexpose(&MPIDI_CH3I_chan, &g->key, &g->wh);
    MPL_free(g);
}

/* A dynamic window created with info coll_attach=true? */
static int rdma_rma_coll_attach(const MPIR_Win * win, MPIR_Info * info)
{
    char v[MPI_MAX_INFO_VAL + 1];
    int flag = 0;

    return win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC && info
        && MPIR_Info_get_impl(info, "coll_attach", MPI_MAX_INFO_VAL, v, &flag) == MPI_SUCCESS
        && flag && !strcmp(v, "true");
}

/* The empty trees of a coll_attach window. */
static int rdma_rma_trees_make(struct MPIDI_CH3I_win_rma *r, int n)
{
    int i, mpi_errno = MPI_SUCCESS;

    r->attached = MPL_calloc(n, sizeof(*r->attached), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!r->attached, mpi_errno, MPI_ERR_OTHER, "**nomem");
    for (i = 0; i < n; i++)
        MPIR_ERR_CHKANDJUMP(MPL_gavl_tree_create(rdma_rma_region_free, &r->attached[i]),
                            mpi_errno, MPI_ERR_OTHER, "**nomem");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static void rdma_rma_trees_free(struct MPIDI_CH3I_win_rma *r, int n)
{
    int i;

    for (i = 0; r->attached && i < n; i++)
        if (r->attached[i])
            MPL_gavl_tree_destory(r->attached[i]);
    MPL_free(r->attached);
    r->attached = NULL;
}

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
    if (rdma_rma_coll_attach(win, info)) {
        mpi_errno = rdma_rma_trees_make(r, n);
        MPIR_ERR_CHECK(mpi_errno);
    }
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
    rdma_rma_trees_free(r, win->comm_ptr->local_size);       /* regions left attached */
    rdma_chan_win_unexpose(&MPIDI_CH3I_chan, &r->self, &r->wh);
    MPL_free(r);
    win->rma = NULL;
}

/* Add a copy of rank i's region a to its tree. */
static int rdma_rma_region_add(struct MPIDI_CH3I_win_rma *r, int i, const rdma_rma_attach_t * a)
{
    rdma_rma_region_t *g = MPL_calloc(1, sizeof(*g), MPL_MEM_RMA);
    int mpi_errno = MPI_SUCCESS;

    MPIR_ERR_CHKANDJUMP(!g, mpi_errno, MPI_ERR_OTHER, "**nomem");
    g->key = a->key;
    if (MPL_gavl_tree_insert(r->attached[i], (void *) (uintptr_t) a->base, a->len, g)) {
        MPL_free(g);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPI_Win_attach (the patched MPID_Win_attach): with coll_attach, expose
 * [base, base+size), keep it in our tree, and add every rank's region to
 * its tree.  Collective then, as the hint promises.  Ours is published
 * only once our tree holds it (the tree's free unexposes it), so every key
 * a peer holds is one we still have registered; a region we cannot keep
 * is not published, and the peers use messages for it. */
int MPIDI_CH3_Win_attach_hook(MPIR_Win * win, void *base, MPI_Aint size)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    rdma_rma_attach_t *all = NULL, mine = { (uintptr_t) base, (uint64_t) size, {{0}, 0, 0} };
    rdma_rma_region_t *g;
    int i, n = win->comm_ptr->local_size, me = win->comm_ptr->rank, mpi_errno = MPI_SUCCESS;

    if (!r || !r->attached)
        return MPI_SUCCESS;
    g = MPL_calloc(1, sizeof(*g), MPL_MEM_RMA);
    all = MPL_malloc((size_t) n * sizeof(*all), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!g || !all, mpi_errno, MPI_ERR_OTHER, "**nomem");
    g->own = 1;
    rdma_chan_win_expose(&MPIDI_CH3I_chan, base, (size_t) size, &g->key, &g->wh);
    if (g->key.ok && size && !MPL_gavl_tree_insert(r->attached[me], base, (uintptr_t) size, g))
        mine.key = g->key;
    else
        rdma_rma_region_free(g);
    g = NULL;
    mpi_errno = MPIR_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE,
                               win->comm_ptr, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    MPIR_ERR_CHKANDJUMP(errflag, mpi_errno, MPI_ERR_OTHER, "**coll_fail");
    for (i = 0; i < n; i++)
        if (i != me && all[i].key.ok) {
            mpi_errno = rdma_rma_region_add(r, i, &all[i]);
            MPIR_ERR_CHECK(mpi_errno);
        }
  fn_exit:
    MPL_free(g);
    MPL_free(all);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPI_Win_detach: with coll_attach, every rank drops every rank's region
 * (after the allgather: no origin still reaches it), ours unexposed. */
int MPIDI_CH3_Win_detach_hook(MPIR_Win * win, const void *base)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    uint64_t *bases = NULL, mine = (uintptr_t) base;
    int i, n = win->comm_ptr->local_size, mpi_errno = MPI_SUCCESS;

    if (!r || !r->attached)
        return MPI_SUCCESS;
    bases = MPL_malloc((size_t) n * sizeof(*bases), MPL_MEM_RMA);
    MPIR_ERR_CHKANDJUMP(!bases, mpi_errno, MPI_ERR_OTHER, "**nomem");
    mpi_errno = MPIR_Allgather(&mine, 1, MPI_UINT64_T, bases, 1, MPI_UINT64_T, win->comm_ptr,
                               &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    MPIR_ERR_CHKANDJUMP(errflag, mpi_errno, MPI_ERR_OTHER, "**coll_fail");
    for (i = 0; i < n; i++)
        MPL_gavl_tree_delete_start_addr(r->attached[i], (void *) (uintptr_t) bases[i]);
  fn_exit:
    MPL_free(bases);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
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

/* The keys for o's target range: those of a region attached with
 * coll_attach that holds it, else the window's (a dynamic window's: all of
 * memory, over the transports that register nothing). */
static const rdma_chan_wkey_t *rdma_rma_key(const struct MPIDI_CH3I_win_rma *r, int target,
                                            const rdma_rma_op_t * o)
{
    void *g = NULL;

    if (r->attached)
        MPL_gavl_tree_search(r->attached[target], (void *) o->raddr, o->len, &g);
    return g ? &((rdma_rma_region_t *) g)->key : &r->keys[target];
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
        mpi_errno = rdma_rma_start(vc, &o, rdma_rma_key(r, target, &o), &req);
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

/* The patched enqueue (see the top): does op wait to carry its epoch's
 * synchronisation?  A small put or accumulate opening a lock epoch does:
 * it carries the lock request (a message then in any case) and the
 * unlock, one message and its answer.  Once the lock is held an
 * accumulate (always a message) does, carrying the flush or unlock.  Not
 * a put then (in a stream on a node waiting cost 5-25% of the bandwidth up
 * to 64 B, and a direct one could carry nothing), nor an operation the
 * target answers (a get flushed after each took 1.04x the time; host H,
 * 2026-12-06, docs/results/rma.md). */
int MPIDI_CH3_RMA_Op_hold(MPIDI_RMA_Op_t * op, MPIR_Win * win, MPIDI_RMA_Target_t * target)
{
    MPIDI_CH3_Pkt_type_t t = op->pkt.type;
    int acc = t == MPIDI_CH3_PKT_ACCUMULATE || t == MPIDI_CH3_PKT_ACCUMULATE_IMMED;

    (void) win;
    if (target->access_state == MPIDI_RMA_LOCK_CALLED)
        return op->piggyback_lock_candidate
            && (acc || t == MPIDI_CH3_PKT_PUT || t == MPIDI_CH3_PKT_PUT_IMMED);
    return acc;
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
