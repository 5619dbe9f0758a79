/*
 * rdma_win.c -- MPI-3 shared memory: MPI_COMM_TYPE_SHARED and the window
 * hooks CH3 gives a channel (MPIDI_CH3U_Win_fns_t, MPIDI_CH3U_Win_hooks_t).
 *
 * A window made by MPI_Win_allocate or MPI_Win_allocate_shared lives, for
 * the ranks of one node, in one node segment (rdma_chan_seg_*: a memfd,
 * like the rings), laid out
 *
 *   header page: the accumulate mutex | node rank 0's part | rank 1's | ...
 *
 * (parts packed, or each page aligned with alloc_shared_noncontig).  CH3
 * then serves every operation to a target on the node itself, with loads
 * and stores (mpid_rma_shm.h), accumulates under the window's
 * process-shared mutex (MPIDI_CH3I_SHM_MUTEX_*, mpidi_ch3_impl.h), and
 * MPI_Win_shared_query gives the peer's part.  Windows over user memory
 * (MPI_Win_create), dynamic windows and targets on other nodes go
 * through CH3's issue path, where rdma_rma.c does contiguous puts and
 * gets directly.
 *
 * MPI_Alloc_mem (MPIDI_CH3I_Alloc_mem): blocks of 2 MiB and more are
 * whole 2 MiB-aligned pages advised as transparent huge pages.
 *
 * Node communicators group the node's ranks whenever segments can be
 * made: the shm transport is open (MPIR_CVAR_CH3_RDMA_TRANSPORT is not
 * verbs) and the OS has process-shared mutexes.
 */
#include "rdma_glue.h"
#include "mpir_info.h"
#include "mpidrma.h"
#include <sys/mman.h>
#include "uthash.h"

#define RDMA_WIN_PAGE ((MPI_Aint) 4096)

static int rdma_win_shm_usable(void)
{
    return rdma_chan_seg_usable(&MPIDI_CH3I_chan) && MPL_proc_mutex_enabled();
}

/* MPIR_Comm_fns->split_type: what ch3:nemesis does, with our test. */
static int rdma_split_type(MPIR_Comm * user_comm, int stype, int key, MPIR_Info * info,
                           MPIR_Comm ** newcomm)
{
    MPIR_Comm *comm = NULL;
    int mpi_errno = MPIR_Comm_split_impl(user_comm, stype == MPI_UNDEFINED ? MPI_UNDEFINED : 0,
                                         key, &comm);

    MPIR_ERR_CHECK(mpi_errno);
    if (stype == MPI_UNDEFINED)
        *newcomm = NULL;
    else if (stype == MPI_COMM_TYPE_SHARED && rdma_win_shm_usable())
        mpi_errno = MPIR_Comm_split_type_node_topo(comm, key, info, newcomm);
    else if (stype == MPI_COMM_TYPE_SHARED)
        mpi_errno = MPIR_Comm_split_type_self(comm, key, newcomm);
    else if (stype == MPIX_COMM_TYPE_NEIGHBORHOOD)
        mpi_errno = MPIR_Comm_split_type_neighborhood(comm, stype, key, info, newcomm);
    else
        mpi_errno = MPIR_Comm_split_type(comm, stype, key, info, newcomm);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    if (comm)
        MPIR_Comm_free_impl(comm);
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

MPIR_Commops MPIDI_CH3I_RDMA_comm_fns = { rdma_split_type };

static int rdma_win_init(MPI_Aint size, int disp_unit, int create_flavor, int model,
                         MPIR_Info * info, MPIR_Comm * comm_ptr, MPIR_Win ** win_ptr)
{
    MPL_UNREFERENCED_ARG(size);
    MPL_UNREFERENCED_ARG(disp_unit);
    MPL_UNREFERENCED_ARG(create_flavor);
    MPL_UNREFERENCED_ARG(model);
    MPL_UNREFERENCED_ARG(info);
    MPL_UNREFERENCED_ARG(comm_ptr);
    (*win_ptr)->shm_seg = NULL;
    (*win_ptr)->shm_seg_len = 0;
    (*win_ptr)->shm_mutex = NULL;
    (*win_ptr)->rma = NULL;
    return MPI_SUCCESS;
}

/* Node rank 0 makes the segment, the others map it, then it is sealed;
 * *ok: 1 on every rank of node, or 0 on every one (nothing left mapped,
 * and ours says why in MPIDI_CH3I_chan.msg, or is left empty). */
static int rdma_win_seg_share(MPIR_Comm * node, size_t len, rdma_seg_t * seg, int *ok)
{
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    int mpi_errno, mine;
    rdma_status_t st = RDMA_OK;

    if (node->rank == 0)
        st = rdma_chan_seg_make(&MPIDI_CH3I_chan, len, seg);
    mpi_errno = MPIR_Bcast(seg, sizeof(*seg), MPI_BYTE, 0, node, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (node->rank != 0) {
        seg->map = NULL;        /* the maker's address */
        st = seg->fd >= 0 ? rdma_chan_seg_map(&MPIDI_CH3I_chan, seg) : RDMA_ERR_PEER;
    }
    mine = st == RDMA_OK;
    mpi_errno = MPIR_Allreduce(&mine, ok, 1, MPI_INT, MPI_MIN, node, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    if (*ok)
        rdma_chan_seg_seal(&MPIDI_CH3I_chan, seg);
    else
        rdma_chan_seg_free(&MPIDI_CH3I_chan, seg);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Where each node rank's part starts (0: its size is 0, NULL base). */
static MPI_Aint rdma_win_layout(const MPI_Aint * sizes, int n, int noncontig, MPI_Aint * off)
{
    MPI_Aint at = RDMA_WIN_PAGE;

    for (int i = 0; i < n; i++) {
        off[i] = sizes[i] ? at : 0;
        at += noncontig ? MPL_ROUND_UP_ALIGN(sizes[i], RDMA_WIN_PAGE) : sizes[i];
    }
    return at;
}

/* The node segment of *win_ptr (a collective of its node communicator)
 * and its parts; *ok 0: none could be made, nothing changed. */
static int rdma_win_seg_alloc(MPI_Aint size, MPIR_Win * win, int *ok)
{
    MPIR_Comm *node = win->comm_ptr->node_comm;
    MPIR_Errflag_t errflag = MPIR_ERR_NONE;
    MPI_Aint *sizes, *off, len;
    rdma_seg_t seg = {.map = NULL,.fd = -1 };
    int mpi_errno, err = 0, n = node->local_size;
    MPIR_CHKPMEM_DECL(1);
    MPIR_CHKLMEM_DECL(2);

    MPIR_CHKLMEM_MALLOC(sizes, MPI_Aint *, n * sizeof(MPI_Aint), mpi_errno, "sizes", MPL_MEM_RMA);
    MPIR_CHKLMEM_MALLOC(off, MPI_Aint *, n * sizeof(MPI_Aint), mpi_errno, "offsets", MPL_MEM_RMA);
    mpi_errno = MPIR_Allgather(&size, 1, MPI_AINT, sizes, 1, MPI_AINT, node, &errflag);
    MPIR_ERR_CHECK(mpi_errno);
    len = rdma_win_layout(sizes, n, win->info_args.alloc_shared_noncontig, off);
    mpi_errno = rdma_win_seg_share(node, (size_t) len, &seg, ok);
    MPIR_ERR_CHECK(mpi_errno);
    if (!*ok)
        goto fn_exit;
    MPIR_CHKPMEM_MALLOC(win->shm_base_addrs, void **, n * sizeof(void *), mpi_errno,
                        "shm_base_addrs", MPL_MEM_SHM);
    for (int i = 0; i < n; i++)
        win->shm_base_addrs[i] = off[i] ? (char *) seg.map + off[i] : NULL;
    win->shm_seg = seg.map;
    win->shm_seg_len = seg.len;
    win->shm_mutex = seg.map;
    if (node->rank == 0)
        MPL_proc_mutex_create(win->shm_mutex, &err);
    mpi_errno = MPIR_Bcast(&err, 1, MPI_INT, 0, node, &errflag);        /* the mutex is made */
    MPIR_ERR_CHECK(mpi_errno);
    if (err) {
        snprintf(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg),
                 "shared window: cannot make its process-shared mutex");
        mpi_errno = rdma_mpi_errno(RDMA_ERR_SYS, RDMA_AT_RUN);
        goto fn_fail;
    }
    win->shm_allocated = TRUE;
    win->base = win->shm_base_addrs[node->rank];
  fn_exit:
    MPIR_CHKLMEM_FREEALL();
    return mpi_errno;
  fn_fail:
    MPIR_CHKPMEM_REAP();
    win->shm_base_addrs = NULL;
    win->shm_seg = NULL;
    win->shm_mutex = NULL;
    rdma_chan_seg_free(&MPIDI_CH3I_chan, &seg);
    goto fn_exit;
}

/* MPI_Win_allocate(_shared) with ranks on this node: their parts in one
 * node segment.  If it cannot be made, MPI_Win_allocate falls back to
 * private memory (CH3's active messages); MPI_Win_allocate_shared fails. */
static int rdma_win_allocate_shm(MPI_Aint size, int disp_unit, MPIR_Info * info,
                                 MPIR_Comm * comm_ptr, void *base_ptr, MPIR_Win ** win_ptr)
{
    MPIR_Win *win = *win_ptr;
    int mpi_errno = MPI_SUCCESS, ok = 0;

    MPIDI_CH3I_chan.msg[0] = '\0';
    if (win->comm_ptr->node_comm && rdma_win_shm_usable()) {
        mpi_errno = rdma_win_seg_alloc(size, win, &ok);
        MPIR_ERR_CHECK(mpi_errno);
    }
    if (!ok && win->create_flavor == MPI_WIN_FLAVOR_SHARED && win->comm_ptr->node_comm) {
        if (!MPIDI_CH3I_chan.msg[0])
            snprintf(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), "shared window: %s",
                     rdma_win_shm_usable() ? "a rank of the node could not map its segment"
                     : "no shared memory (MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs)");
        mpi_errno = rdma_mpi_errno(RDMA_ERR_INVAL, RDMA_AT_RUN);
        goto fn_fail;
    }
    if (!ok) {
        mpi_errno = MPIDI_CH3U_Win_allocate_no_shm(size, disp_unit, info, comm_ptr, base_ptr,
                                                   win_ptr);
        goto fn_exit;
    }
    *(void **) base_ptr = win->base;
    mpi_errno = MPIDI_CH3U_Win_fns.gather_info(win->base, size, disp_unit, info, comm_ptr,
                                               win_ptr);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPI_Win_shared_query: the part of target_rank (MPI_PROC_NULL: of the
 * first rank whose size is not 0). */
static int rdma_win_shared_query(MPIR_Win * win, int target_rank, MPI_Aint * size,
                                 int *disp_unit, void *baseptr)
{
    int r = target_rank;

    if (!win->shm_seg)
        return MPIDI_CH3U_Win_shared_query(win, target_rank, size, disp_unit, baseptr);
    for (int i = 0; r == MPI_PROC_NULL && i < win->comm_ptr->local_size; i++)
        if (win->basic_info_table[i].size > 0)
            r = i;
    if (r == MPI_PROC_NULL || win->comm_ptr->intranode_table[r] < 0) {
        *size = 0;
        *disp_unit = 0;
        *(void **) baseptr = NULL;
        return MPI_SUCCESS;
    }
    *size = win->basic_info_table[r].size;
    *disp_unit = win->basic_info_table[r].disp_unit;
    *(void **) baseptr = win->shm_base_addrs[win->comm_ptr->intranode_table[r]];
    return MPI_SUCCESS;
}

/* After MPI_Win_free's barrier: no rank of the node uses the segment. */
static int rdma_win_free(MPIR_Win ** win_ptr)
{
    MPIR_Win *win = *win_ptr;
    rdma_seg_t seg = {.map = win->shm_seg,.len = win->shm_seg_len,.fd = -1 };

    MPIDI_CH3I_RDMA_win_rma_free(win);
    if (!win->shm_seg)
        return MPI_SUCCESS;
    rdma_chan_seg_free(&MPIDI_CH3I_chan, &seg);
    MPL_free(win->shm_base_addrs);
    win->shm_base_addrs = NULL;
    win->shm_seg = NULL;
    win->shm_mutex = NULL;
    return MPI_SUCCESS;         /* shm_allocated stays: CH3 must not free base */
}

int MPIDI_CH3_Win_fns_init(MPIDI_CH3U_Win_fns_t * win_fns)
{
    win_fns->allocate_shm = rdma_win_allocate_shm;
    win_fns->shared_query = rdma_win_shared_query;
    return MPIDI_CH3I_RDMA_win_rma_init(win_fns);
}

int MPIDI_CH3_Win_hooks_init(MPIDI_CH3U_Win_hooks_t * win_hooks)
{
    win_hooks->win_init = rdma_win_init;
    win_hooks->win_free = rdma_win_free;
    return MPI_SUCCESS;
}

/* The pipe is a FIFO per VC: active-message flushes are ordered. */
int MPIDI_CH3_Win_pkt_orderings_init(MPIDI_CH3U_Win_pkt_ordering_t * win_pkt_orderings)
{
    win_pkt_orderings->am_flush_ordered = 1;
    return MPI_SUCCESS;
}

/* MPI_Alloc_mem from RDMA_HUGE_MIN bytes on: a mapping of whole huge pages,
 * aligned, advised MADV_HUGEPAGE (a no-op where THP is off), so a CMA
 * copy pins and walks 512x fewer pages, as would a verbs registration.
 * From half a huge page the rounding costs at most the block's own size,
 * as above 2 MiB; a 1 MiB message between such blocks went from
 * 0.46-0.57 to 1.14-1.31 of memcpy's rate one way (docs/results/shm.md).
 * Host H 2026-12-05: a 4 MiB process_vm_readv moved 40 GB/s from huge
 * pages, 20 from small ones; ping-pong messages of 2-16 MiB between such
 * blocks took 0.38-0.57x ch3:nemesis' time (docs/results/shm.md).
 * rdma_huge_maps: only MPI_Alloc_mem and MPI_Free_mem touch it, under
 * MPICH's global critical section (MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX). */
enum { RDMA_HUGE = 2 << 20, RDMA_HUGE_MIN = RDMA_HUGE / 2 };
typedef struct rdma_huge {
    void *ptr;
    size_t len;
    UT_hash_handle hh;
} rdma_huge_t;
static rdma_huge_t *rdma_huge_maps;

void *MPIDI_CH3I_Alloc_mem(MPI_Aint size, MPIR_Info * info_ptr)
{
    size_t len = ((size_t) size + RDMA_HUGE - 1) & ~((size_t) RDMA_HUGE - 1);
    uintptr_t base, p;
    rdma_huge_t *h;
    void *m;

    (void) info_ptr;
    if (size < RDMA_HUGE_MIN)
        return MPL_malloc(size, MPL_MEM_USER);
    h = MPL_malloc(sizeof(*h), MPL_MEM_RMA);
    if (!h)
        return NULL;
    m = mmap(NULL, len + RDMA_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        MPL_free(h);
        return NULL;
    }
    base = (uintptr_t) m;
    p = (base + RDMA_HUGE - 1) & ~((uintptr_t) RDMA_HUGE - 1);
    if (p > base)               /* keep only the aligned pages */
        munmap(m, p - base);
    munmap((void *) (p + len), base + RDMA_HUGE - p);
    madvise((void *) p, len, MADV_HUGEPAGE);
    h->ptr = (void *) p;
    h->len = len;
    HASH_ADD_PTR(rdma_huge_maps, ptr, h, MPL_MEM_RMA);
    return h->ptr;
}

int MPIDI_CH3I_Free_mem(void *ptr)
{
    rdma_huge_t *h;

    HASH_FIND_PTR(rdma_huge_maps, &ptr, h);
    if (!h) {
        MPL_free(ptr);
        return MPI_SUCCESS;
    }
    HASH_DEL(rdma_huge_maps, h);
    munmap(h->ptr, h->len);
    MPL_free(h);
    return MPI_SUCCESS;
}
