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
 * message (counted: rdma_rma_messages).  A put or get to a target whose
 * epoch is granted and idle skips CH3's queue and issue loop: the patched
 * MPIDI_CH3I_Put and Get ask MPIDI_CH3_RMA_Start_direct first, and
 * MPI_Win_flush and flush_local of a target with nothing of CH3's to
 * issue only wait (target_has_nothing_to_issue in the patch): an 8-byte
 * get and flush executes 952 instructions (1,490 before either;
 * docs/results/rma.md).  Messages carry the epoch's
 * synchronisation where they can: the patch makes CH3 keep the last
 * operation back until the next one or the synchronisation call
 * (MPIR_CVAR_CH3_RMA_DELAY_ISSUING_FOR_PIGGYBACKING defaults to 1 in this
 * build), so that lock, operation and unlock, or an accumulate and its
 * flush, travel as one message; MPIDI_CH3_RMA_Op_hold says which
 * operations wait.
 *
 * Atomics.  The NIC's atomics (8-byte fetch-and-add and compare-and-swap)
 * are atomic with each other, not with the CPU's accesses, so a window
 * uses them only where every accumulate to it goes through the NIC: it
 * is created with the info keys MPICH's ch4 reads for this,
 * disable_shm_accumulate=true (no accumulate done by a CPU, the target's
 * own included) and which_accumulate_ops naming only sum, no_op and
 * cswap; it is not shared, nor dynamic unless created with coll_attach
 * (then under the key of the attached region that holds the element);
 * and every rank reaches every other over verbs with atomics (one rank
 * per node, or TRANSPORT=verbs) or shares a node segment with it
 * (MPI_Win_allocate with node peers: CH3's local path reaches their
 * parts, and so does the NIC, through our registration of the segment,
 * r->seg), which each rank checks before the key allgather, clearing its
 * key's amo bits if not, so that all agree.  The NIC's atomics on one
 * HCA are atomic with each other whichever QP and registration reach the
 * memory (ranks of a node on different HCAs would break this).  Then
 * every accumulate, get_accumulate, fetch-and-op (sum, no_op) and
 * compare-and-swap of an 8-byte integer type, contiguous, at an 8-aligned
 * target address, is one NIC atomic per element (MPI's atomicity is per
 * element and per predefined type; other types, ops and addresses keep
 * the message path, each always the same way): to a peer from the
 * patched issue loop, never carrying a lock request
 * (MPIDI_CH3_RMA_Op_hold clears piggyback_lock_candidate) and, as the
 * last operation of an ending epoch, followed by the end the patched loop
 * sends once it is issued; to ourselves or a node peer in the segment
 * from CH3's local path (MPIDI_CH3_RMA_Local_atomic), through a loopback
 * QP, finished on return.  Such an operation never falls back to a message:
 * a peer not connected yet leaves it queued until the connection is
 * (*direct < 0; the patched loop then activates the window, so that CH3's
 * progress hook issues it later: a fence's closing pass would not come
 * back).  Counted: rdma_rma_direct_atomics.
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
    rdma_chan_wkey_t seg;       /* where the NIC does the accumulates: the node
                                 * segment (win->shm_seg) registered by us, our
                                 * way to node peers' parts; ok 0: none */
    rdma_chan_wh_t seg_wh;
    uint64_t puts, gets, atomics, messages;     /* this window's operations */
    int amo;                    /* accumulates go through the NIC (see the top) */
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

/* Info key k's value in v (MPI_MAX_INFO_VAL + 1 bytes); 0: not set. */
static int rdma_rma_info(MPIR_Info * info, const char *k, char *v)
{
    int flag = 0;

    return info && MPIR_Info_get_impl(info, k, MPI_MAX_INFO_VAL, v, &flag) == MPI_SUCCESS && flag;
}

/* A dynamic window created with info coll_attach=true? */
static int rdma_rma_coll_attach(const MPIR_Win * win, MPIR_Info * info)
{
    char v[MPI_MAX_INFO_VAL + 1];

    return win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC && rdma_rma_info(info, "coll_attach", v)
        && !strcmp(v, "true");
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

/* which_accumulate_ops (in val) names only operations the NIC does. */
static int rdma_rma_nic_ops(char *val)
{
    char *tok, *save;

    for (tok = strtok_r(val, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (strcmp(tok, "sum") && strcmp(tok, "no_op") && strcmp(tok, "cswap"))
            return 0;
    return 1;
}

/* May this rank's accumulates to win go through the NIC (see the top)?
 * The hints, the flavour (a dynamic one with coll_attach: its regions'
 * keys), and every peer (and we) over verbs with atomics, or a node peer
 * whose part of the node segment we registered (r->seg, registered here;
 * gather_info drops it if the window's vote fails), if the window spans
 * nodes: on one node CH3's loads and stores need no target CPU either,
 * and cost a fraction of a loopback atomic. */
static int rdma_rma_amo_hinted(MPIR_Win * win, MPIR_Info * info)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    char v[MPI_MAX_INFO_VAL + 1];
    MPIDI_VC_t *me;
    int i, seg_peers = 0, off_node = 0;

    if ((win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC && !r->attached)
        || win->create_flavor == MPI_WIN_FLAVOR_SHARED
        || !rdma_rma_info(info, "disable_shm_accumulate", v)
        || strcmp(v, "true") || !rdma_rma_info(info, "which_accumulate_ops", v)
        || !rdma_rma_nic_ops(v) || !rdma_chan_amo_link(&MPIDI_CH3I_chan, NULL))
        return 0;
    if (win->shm_seg) {
        rdma_chan_win_expose(&MPIDI_CH3I_chan, win->shm_seg, win->shm_seg_len, &r->seg,
                             &r->seg_wh);
        if (!(r->seg.amo & 1u << RDMA_XP_VERBS))
            return 0;
    }
    MPIDI_Comm_get_vc(win->comm_ptr, win->comm_ptr->rank, &me);
    for (i = 0; i < win->comm_ptr->local_size; i++) {
        MPIDI_VC_t *vc;

        if (i == win->comm_ptr->rank)
            continue;
        MPIDI_Comm_get_vc(win->comm_ptr, i, &vc);
        off_node |= vc->node_id != me->node_id;
        if (rdma_chan_amo_link(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc)))
            continue;
        if (!win->shm_seg || vc->node_id != me->node_id)
            return 0;
        seg_peers = 1;
    }
    return !seg_peers || off_node;
}

/* gather_info, then expose base over the transports and gather the keys. */
static int rdma_rma_gather_info(void *base, MPI_Aint size, int disp_unit, MPIR_Info * info,
                                MPIR_Comm * comm, MPIR_Win ** win_ptr)
{
    MPIR_Win *win;
    struct MPIDI_CH3I_win_rma *r;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int i, n = comm->local_size, mpi_errno;

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
    if (!rdma_rma_amo_hinted(win, info))
        r->self.amo = 0;
    else if (r->attached)       /* its vote: attach registers regions with atomics */
        r->self.amo = 1u << RDMA_XP_VERBS;
    mpi_errno = MPIR_Allgather(&r->self, sizeof(r->self), MPI_BYTE, r->keys, sizeof(r->self),
                               MPI_BYTE, comm, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    MPIR_ERR_CHKANDJUMP(errflag, mpi_errno, MPI_ERR_OTHER, "**coll_fail");
    r->amo = 1;
    for (i = 0; i < n; i++)
        r->amo &= !!(r->keys[i].amo & 1u << RDMA_XP_VERBS);
    if (!r->amo && r->seg.ok) {
        rdma_chan_win_unexpose(&MPIDI_CH3I_chan, &r->seg, &r->seg_wh);
        r->seg.ok = 0;
    }
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
    if (MPIDI_CH3I_chan.cfg.verbose && (r->puts || r->gets || r->atomics || r->messages))
        fprintf(stderr, "[ch3:rdma] rank %d: window %#x: %llu puts, %llu gets and %llu "
                "atomics direct%s, %llu operations as messages\n", MPIDI_CH3I_chan.rank,
                (unsigned) win->handle, (unsigned long long) r->puts,
                (unsigned long long) r->gets, (unsigned long long) r->atomics,
                r->amo ? " (accumulates through the NIC)" : "", (unsigned long long) r->messages);
    rdma_rma_trees_free(r, win->comm_ptr->local_size);       /* regions left attached */
    rdma_chan_win_unexpose(&MPIDI_CH3I_chan, &r->self, &r->wh);
    rdma_chan_win_unexpose(&MPIDI_CH3I_chan, &r->seg, &r->seg_wh);
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

/* Can a put (get 0) or get of count origin_type elements at origin go
 * direct to raddr in target's window, as target_type?  Then *o says what
 * to move. */
static int rdma_rma_direct_args(const MPIR_Win * win, int target, int get, void *origin,
                                int count, MPI_Datatype origin_type, MPI_Datatype target_type,
                                uintptr_t raddr, rdma_rma_op_t * o)
{
    uintptr_t base = (uintptr_t) win->basic_info_table[target].base_addr;
    size_t size = (size_t) win->basic_info_table[target].size;
    MPI_Aint esize;

    if (!rdma_rma_flat(target_type) || !rdma_rma_flat(origin_type) || count <= 0)
        return 0;
    MPIR_Datatype_get_size_macro(origin_type, esize);
    *o = (rdma_rma_op_t) {get, origin, (size_t) esize * (size_t) count, raddr};
    if (win->create_flavor == MPI_WIN_FLAVOR_DYNAMIC)
        return 1;               /* an absolute address in attached memory */
    return raddr >= base && raddr - base <= size && o->len <= size - (raddr - base);
}

/* Can op go direct?  Then *o says what to move. */
static int rdma_rma_direct_op(const MPIDI_RMA_Op_t * op, const MPIR_Win * win, int target,
                              rdma_rma_op_t * o)
{
    const MPIDI_CH3_Pkt_t *p = &op->pkt;

    if (p->type == MPIDI_CH3_PKT_PUT || p->type == MPIDI_CH3_PKT_PUT_IMMED)
        return rdma_rma_direct_args(win, target, 0, op->origin_addr, op->origin_count,
                                    op->origin_datatype, p->put.datatype,
                                    (uintptr_t) p->put.addr, o);
    if (p->type == MPIDI_CH3_PKT_GET)
        return rdma_rma_direct_args(win, target, 1, op->origin_addr, op->origin_count,
                                    op->origin_datatype, p->get.datatype,
                                    (uintptr_t) p->get.addr, o);
    return 0;
}

/* An accumulate the NIC does: n 8-byte elements at raddr, add[0..n) added
 * (add NULL: MPI_NO_OP) or, with cmp, compare-and-swap (n 1: *add for
 * *cmp); the elements found go to result (NULL: not wanted). */
typedef struct rdma_rma_amo {
    const void *add, *cmp;
    void *result;
    int n;
    uintptr_t raddr;
    const rdma_chan_wkey_t *key;        /* the target's, for [raddr, raddr + 8n) */
} rdma_rma_amo_t;

/* An 8-byte integer type: MPI_SUM is the NIC's add. */
static int rdma_rma_amo_type(MPI_Datatype t)
{
    MPI_Aint size;

    if (t != MPI_INT64_T && t != MPI_UINT64_T && t != MPI_LONG && t != MPI_UNSIGNED_LONG
        && t != MPI_LONG_LONG && t != MPI_UNSIGNED_LONG_LONG && t != MPI_AINT
        && t != MPI_OFFSET && t != MPI_COUNT)
        return 0;
    MPIR_Datatype_get_size_macro(t, size);
    return size == 8;
}

/* A derived type of such elements: its accumulates would be the CPU's,
 * not atomic with the NIC's on the same elements. */
static int rdma_rma_amo_derived(MPI_Datatype t)
{
    MPIR_Datatype *d;

    if (MPIR_DATATYPE_IS_PREDEFINED(t))
        return 0;
    MPIR_Datatype_get_ptr(t, d);
    return d && rdma_rma_amo_type(d->basic_type);
}

/* Does CH3's local path reach target's part of win in the node segment
 * (mpid_rma_shm.h), ours included?  Then the NIC goes there through r->seg. */
static int rdma_rma_amo_on_node(const MPIR_Win * win, int target)
{
    return win->shm_allocated && win->create_flavor != MPI_WIN_FLAVOR_SHARED
        && win->comm_ptr->intranode_table[target] >= 0;
}

/* Where target's part of win starts, for the NIC from this rank: in our
 * mapping of the node segment, or at its owner's address. */
static uintptr_t rdma_rma_amo_base(const MPIR_Win * win, int target)
{
    return (uintptr_t) (rdma_rma_amo_on_node(win, target)
                        ? win->shm_base_addrs[win->comm_ptr->intranode_table[target]]
                        : win->basic_info_table[target].base_addr);
}

/* The keys of the region attached with coll_attach that holds target's
 * [raddr, raddr + len); NULL: none (or no coll_attach). */
static const rdma_chan_wkey_t *rdma_rma_region_key(const struct MPIDI_CH3I_win_rma *r,
                                                   int target, uintptr_t raddr, size_t len)
{
    void *g = NULL;

    if (r->attached)
        MPL_gavl_tree_search(r->attached[target], (void *) raddr, len, &g);
    return g ? &((rdma_rma_region_t *) g)->key : NULL;
}

/* The target's key for [raddr, raddr + len) of win, if inside its part:
 * the window's, or in a dynamic window that of the attached region (NULL:
 * an address no rank attached, or a region not registered for atomics;
 * every rank's trees hold the same, so all take the CPU's path there). */
static const rdma_chan_wkey_t *rdma_rma_amo_key(const MPIR_Win * win, int target,
                                                uintptr_t raddr, size_t len)
{
    const struct MPIDI_CH3I_win_rma *r = win->rma;
    const rdma_chan_wkey_t *k;
    uintptr_t base;
    size_t size;

    if (r->attached) {
        k = rdma_rma_region_key(r, target, raddr, len);
        return k && k->amo & 1u << RDMA_XP_VERBS ? k : NULL;
    }
    base = rdma_rma_amo_base(win, target);
    size = (size_t) win->basic_info_table[target].size;
    if (raddr < base || raddr - base > size || len > size - (raddr - base))
        return NULL;
    return rdma_rma_amo_on_node(win, target) ? &r->seg : &r->keys[target];
}

/* Does the NIC do this accumulate to target (see the top)?  n elements of
 * type t (n < 0: origin, target and result differ) at raddr; then *m. */
static int rdma_rma_amo_make(const MPIR_Win * win, int target, const void *add, const void *cmp,
                             void *result, int n, MPI_Datatype t, uintptr_t raddr, MPI_Op op,
                             rdma_rma_amo_t * m)
{
    const struct MPIDI_CH3I_win_rma *r = win->rma;
    const rdma_chan_wkey_t *key;

    if (!r || !r->amo || n < 1 || !rdma_rma_amo_type(t) || raddr % 8
        || (cmp ? n != 1 : op != MPI_SUM && op != MPI_NO_OP)
        || !(key = rdma_rma_amo_key(win, target, raddr, 8 * (size_t) n)))
        return 0;
    *m = (rdma_rma_amo_t) {op == MPI_NO_OP && !cmp ? NULL : add, cmp, result, n, raddr, key};
    return 1;
}

/* The accumulate-family op to target, if the NIC does it (*m); *bad: one
 * it cannot do although its elements are the NIC's (a derived type). */
static int rdma_rma_amo_of(const MPIDI_RMA_Op_t * op, const MPIR_Win * win, int target,
                           rdma_rma_amo_t * m, int *bad)
{
    const MPIDI_CH3_Pkt_t *p = &op->pkt;
    int n = op->origin_count;

    *bad = 0;
    switch (p->type) {
    case MPIDI_CH3_PKT_ACCUMULATE:
    case MPIDI_CH3_PKT_ACCUMULATE_IMMED:
        *bad = rdma_rma_amo_derived(p->accum.datatype);
        return rdma_rma_amo_make(win, target, op->origin_addr, NULL, NULL,
                                 op->origin_datatype == p->accum.datatype
                                 && n == p->accum.count ? n : -1, p->accum.datatype,
                                 (uintptr_t) p->accum.addr, p->accum.op, m);
    case MPIDI_CH3_PKT_GET_ACCUM:
    case MPIDI_CH3_PKT_GET_ACCUM_IMMED:
        *bad = rdma_rma_amo_derived(p->get_accum.datatype);
        n = op->result_datatype == p->get_accum.datatype && op->result_count == p->get_accum.count
            && (p->get_accum.op == MPI_NO_OP || (op->origin_datatype == p->get_accum.datatype
                                                 && n == p->get_accum.count)) ? op->result_count : -1;
        return rdma_rma_amo_make(win, target, op->origin_addr, NULL, op->result_addr, n,
                                 p->get_accum.datatype, (uintptr_t) p->get_accum.addr,
                                 p->get_accum.op, m);
    case MPIDI_CH3_PKT_FOP:
    case MPIDI_CH3_PKT_FOP_IMMED:
        return rdma_rma_amo_make(win, target, op->origin_addr, NULL, op->result_addr, 1,
                                 p->fop.datatype, (uintptr_t) p->fop.addr, p->fop.op, m);
    case MPIDI_CH3_PKT_CAS_IMMED:
        return rdma_rma_amo_make(win, target, op->origin_addr, op->compare_addr,
                                 op->result_addr, 1, p->cas.datatype, (uintptr_t) p->cas.addr,
                                 MPI_NO_OP, m);
    default:
        return 0;
    }
}

/* Elements [first, first + RDMA_XP_AMO_MAX) of m as one transport atomic. */
static void rdma_rma_amo_chunk(const rdma_rma_amo_t * m, int first, rdma_xport_amo_t * a)
{
    int i;

    a->n = m->n - first < RDMA_XP_AMO_MAX ? m->n - first : RDMA_XP_AMO_MAX;
    a->cas = m->cmp != NULL;
    if (m->cmp)
        memcpy(&a->cmp, m->cmp, 8);
    for (i = 0; i < a->n; i++) {
        a->add[i] = 0;
        if (m->add)
            memcpy(&a->add[i], (const char *) m->add + 8 * (size_t) (first + i), 8);
    }
    a->result = m->result ? (char *) m->result + 8 * (size_t) first : NULL;
}

/* A window whose accumulates the NIC does met one it cannot do. */
static int rdma_rma_amo_refuse(const char *why)
{
    int mpi_errno = MPI_SUCCESS;

    MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|amo", "**ch3|rdma|amo %s", why);
    return mpi_errno;
}

/* Start m on vc, one request per RDMA_XP_AMO_MAX elements (op's); *direct
 * 1, or -1: not yet (the connection is being made; nothing started). */
static int rdma_rma_amo_start(MPIDI_VC_t * vc, MPIDI_RMA_Op_t * op, const rdma_rma_amo_t * m,
                              int *direct)
{
    int i, k, nreq = (m->n + RDMA_XP_AMO_MAX - 1) / RDMA_XP_AMO_MAX, mpi_errno = MPI_SUCCESS;
    MPIR_Request **reqs = &op->single_req;
    rdma_link_t *l = MPIDI_CH3I_link(vc);
    rdma_xport_amo_t a;
    rdma_status_t st;

    if (nreq > 1) {
        reqs = op->multi_reqs = MPL_calloc(nreq, sizeof(*reqs), MPL_MEM_RMA);
        MPIR_ERR_CHKANDJUMP(!reqs, mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    op->reqs_size = nreq;
    *direct = 1;
    for (i = k = 0; k < nreq; k++, i += RDMA_XP_AMO_MAX) {
        reqs[k] = MPIR_Request_create(MPIR_REQUEST_KIND__RMA);
        MPIR_ERR_CHKANDJUMP(!reqs[k], mpi_errno, MPI_ERR_OTHER, "**nomemreq");
        rdma_rma_amo_chunk(m, i, &a);
        st = rdma_chan_atomic(&MPIDI_CH3I_chan, l, &a, m->raddr + 8 * (unsigned) i, m->key,
                              reqs[k]);
        if (st != RDMA_OK) {
            MPIR_cc_set(&reqs[k]->cc, 0);
            MPIR_Request_free(reqs[k]);
            reqs[k] = NULL;
            if (st == RDMA_ERR_NOMEM && k == 0) {
                *direct = -1;   /* not connected yet: nothing started */
                op->reqs_size = 0;
                MPL_free(op->multi_reqs);
                op->multi_reqs = NULL;
                break;
            }
            mpi_errno = st == RDMA_ERR_PEER ? MPIDI_CH3I_RDMA_peer_errno(l->xc.why)
                : rdma_rma_amo_refuse("the NIC refused an atomic");
            goto fn_fail;
        }
        MPIR_Request_add_ref(reqs[k]);  /* one for CH3, one for completion */
        MPIDI_CH3I_Sendq_hold(vc, reqs[k]);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
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
 * transport did not start it (no request made for one it refuses: on a
 * node, every operation below RMA_CMA_MIN). */
static int rdma_rma_start(MPIDI_VC_t * vc, const rdma_rma_op_t * o,
                          const rdma_chan_wkey_t * key, MPIR_Request ** req)
{
    MPIR_Request *q;
    int done, mpi_errno = MPI_SUCCESS;

    *req = NULL;
    if (!rdma_chan_rma_ok(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), o->len, key))
        return MPI_SUCCESS;
    q = MPIR_Request_create(MPIR_REQUEST_KIND__RMA);
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
    const rdma_chan_wkey_t *k = rdma_rma_region_key(r, target, o->raddr, o->len);

    return k ? k : &r->keys[target];
}

/* The patched issue loop (see the top): start op directly if it can go;
 * *direct 1 if it went, 0: send it as a message, -1: not yet (an atomic
 * the NIC does, to a peer not connected yet). */
int MPIDI_CH3_RMA_Issue_direct(MPIDI_RMA_Op_t * op, MPIR_Win * win, int target, int lock,
                               int *direct)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    MPIR_Request *req = NULL;
    MPIDI_VC_t *vc;
    rdma_rma_op_t o;
    rdma_rma_amo_t m;
    int bad, mpi_errno = MPI_SUCCESS;

    *direct = 0;
    if (r && r->amo && rdma_rma_amo_of(op, win, target, &m, &bad)) {
        MPIR_Assert(!lock);     /* MPIDI_CH3_RMA_Op_hold: never a lock candidate */
        MPIDI_Comm_get_vc_set_active(win->comm_ptr, target, &vc);
        mpi_errno = rdma_rma_amo_start(vc, op, &m, direct);
        r->atomics += *direct > 0;
        return mpi_errno;
    }
    if (r && r->amo && bad)
        return rdma_rma_amo_refuse("an accumulate of a derived datatype of 8-byte integers");
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

/* Is target's epoch granted (a lock held, or a fence or PSCW access epoch),
 * with no operation of CH3's queued, no synchronisation under way (the
 * flag a flush_local leaves set ends nothing), and room for another
 * request (CH3's ACTIVE_REQ_THRESHOLD)?  *t: its target element, which
 * counts our requests. */
static int rdma_rma_idle(MPIR_Win * win, int target, MPIDI_RMA_Target_t ** t)
{
    int s = win->states.access_state;

    if (target == win->comm_ptr->rank || (MPIR_CVAR_CH3_RMA_ACTIVE_REQ_THRESHOLD >= 0 &&
                                          MPIDI_CH3I_RMA_Active_req_cnt >=
                                          MPIR_CVAR_CH3_RMA_ACTIVE_REQ_THRESHOLD)
        || MPIDI_CH3I_Win_find_target(win, target, t) != MPI_SUCCESS || !*t)
        return 0;
    return ((*t)->access_state == MPIDI_RMA_LOCK_GRANTED || s == MPIDI_RMA_FENCE_GRANTED
            || s == MPIDI_RMA_PSCW_GRANTED) && !(*t)->pending_net_ops_list_head
        && !(*t)->pending_user_ops_list_head
        && (*t)->sync.sync_flag <= MPIDI_RMA_SYNC_FLUSH_LOCAL && !(*t)->win_complete_flag;
}

/* The patched MPIDI_CH3I_Put and Get (see the top): a contiguous put or
 * get to an idle target (rdma_rma_idle) starts here, without CH3's
 * operation and issue loop.  Its request is left as CH3's issue loop
 * leaves an issued operation's (check_and_set_req_completion): counted in
 * the target's num_pkts_wait_for_local_completion, which every
 * synchronisation call waits for, and held on the VC's send queue, so the
 * message that ends the epoch leaves after it.  The request completes
 * only in progress (rdma_chan's owner, never its thread), which cannot
 * run before we return, so its callback is in place in time.  *direct 1
 * if it started; 0: CH3 queues it. */
int MPIDI_CH3_RMA_Start_direct(MPIR_Win * win, int target, int get, void *origin, int count,
                               MPI_Datatype origin_type, MPI_Aint target_disp,
                               MPI_Datatype target_type, MPIR_Request * ureq, int *direct)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    MPIDI_RMA_Target_t *t = NULL;
    MPIR_Request *req = NULL;
    MPIDI_VC_t *vc;
    rdma_rma_op_t o;
    int mpi_errno;

    *direct = 0;
    if (!r || !rdma_rma_idle(win, target, &t)
        || !rdma_rma_direct_args(win, target, get, origin, count, origin_type, target_type,
                                 (uintptr_t) win->basic_info_table[target].base_addr +
                                 (uintptr_t) (win->basic_info_table[target].disp_unit *
                                              target_disp), &o))
        return MPI_SUCCESS;
    MPIDI_Comm_get_vc_set_active(win->comm_ptr, target, &vc);
    mpi_errno = rdma_rma_start(vc, &o, rdma_rma_key(r, target, &o), &req);
    if (mpi_errno || !req)
        return mpi_errno;       /* not started: CH3's queue (counted there) */
    *direct = 1;
    r->gets += get;
    r->puts += !get;
    rdma_chan_rma_at_call(&MPIDI_CH3I_chan);
    if (!MPIR_Request_is_complete(req)) {
        req->dev.request_completed_cb = MPIDI_CH3_Req_handler_rma_op_complete;
        req->dev.source_win_handle = win->handle;
        req->dev.rma_target_ptr = t;
        if (ureq) {
            MPIR_cc_set(&ureq->cc, 1);
            req->dev.request_handle = ureq->handle;
        }
        MPIDI_CH3I_RMA_Active_req_cnt++;
        t->num_pkts_wait_for_local_completion++;
        ureq = NULL;
    }
    MPIR_Request_free(req);     /* CH3's reference */
    return ureq ? MPID_Request_complete(ureq) : MPI_SUCCESS;
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
    int bad, acc = t == MPIDI_CH3_PKT_ACCUMULATE || t == MPIDI_CH3_PKT_ACCUMULATE_IMMED;
    struct MPIDI_CH3I_win_rma *r = win->rma;
    rdma_rma_amo_t m;

    if (r && r->amo && rdma_rma_amo_of(op, win, target->target_rank, &m, &bad)) {
        op->piggyback_lock_candidate = 0;       /* the NIC's: the lock goes apart */
        return 0;
    }
    if (target->access_state == MPIDI_RMA_LOCK_CALLED)
        return op->piggyback_lock_candidate
            && (acc || t == MPIDI_CH3_PKT_PUT || t == MPIDI_CH3_PKT_PUT_IMMED);
    return acc;
}

/* CH3's local path (the patched MPIDI_CH3I_Accumulate, Get_accumulate,
 * MPID_Fetch_and_op and MPID_Compare_and_swap, to ourselves or to a node
 * peer's part of the node segment): where the NIC does this window's
 * accumulates, it does this one too, through the loopback QP (finished
 * here, *done 1), a node peer's part through our mapping of the segment.
 * count < 0: origin, target and result differ (not the NIC's);
 * target_type: the target's datatype. */
int MPIDI_CH3_RMA_Local_atomic(MPIR_Win * win, int target, const void *origin,
                               const void *compare, void *result, int count,
                               MPI_Datatype target_type, MPI_Aint target_disp, MPI_Op op,
                               int *done)
{
    struct MPIDI_CH3I_win_rma *r = win->rma;
    int i;
    uintptr_t raddr;
    rdma_xport_amo_t a;
    rdma_rma_amo_t m;

    *done = 0;
    if (!r || !r->amo)
        return MPI_SUCCESS;
    raddr = rdma_rma_amo_base(win, target)
        + (uintptr_t) (win->basic_info_table[target].disp_unit * target_disp);
    if (!rdma_rma_amo_make(win, target, origin, compare, result, count, target_type, raddr, op,
                           &m))
        return rdma_rma_amo_derived(target_type) ?
            rdma_rma_amo_refuse("an accumulate of a derived datatype of 8-byte integers") :
            MPI_SUCCESS;
    for (i = 0; i < m.n; i += RDMA_XP_AMO_MAX) {
        rdma_rma_amo_chunk(&m, i, &a);
        if (rdma_chan_atomic(&MPIDI_CH3I_chan, NULL, &a, raddr + 8 * (unsigned) i, m.key,
                             NULL) != RDMA_OK)
            return rdma_rma_amo_refuse(MPIDI_CH3I_chan.msg);
    }
    r->atomics++;
    *done = 1;
    return MPI_SUCCESS;
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
