/*
 * ch3_init.c -- CH3 lifecycle and VC/PG hooks of ch3:rdma.
 */
#include "rdma_glue.h"
#include <unistd.h>

/* Print the channel's own one-line diagnosis (the innermost "[ch3:rdma]"
 * entry of the error stack) and give hydra time to forward it: its abort
 * path can drop output that is still in the pipe.  A bad tunable or a
 * missing device fails every rank alike, so the others wait for rank 0. */
static void report_init_failure(int mpi_errno, int pg_rank)
{
    char msg[MPI_MAX_ERROR_STRING];
    const char *d = NULL, *p;

    if (pg_rank != 0)
        sleep(3);
    MPIR_Err_get_string(mpi_errno, msg, sizeof(msg), NULL);
    for (p = msg; (p = strstr(p, "[ch3:rdma]")) != NULL; p++)
        d = p;
    if (d) {
        fprintf(stderr, "%.*s\n", (int) strcspn(d, "\n"), d);
        fflush(stderr);
        usleep(500000);
    }
}

int MPIDI_CH3_Init(int has_parent, MPIDI_PG_t * pg_p, int pg_rank)
{
    int mpi_errno = MPI_SUCCESS;

    MPL_UNREFERENCED_ARG(has_parent);   /* CH3 connects to the parent's port */
    MPIR_Comm_fns = &MPIDI_CH3I_RDMA_comm_fns;  /* MPI_COMM_TYPE_SHARED (rdma_win.c) */
    mpi_errno = MPIDI_CH3I_Progress_init();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_CH3I_RDMA_init(pg_p, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    report_init_failure(mpi_errno, pg_rank);
    goto fn_exit;
}

int MPIDI_CH3_Finalize(void)
{
    int mpi_errno = MPIDI_CH3I_RDMA_finalize();

    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_CH3I_Progress_finalize();
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_CH3_InitCompleted(void)
{
    return MPI_SUCCESS;
}

int MPIDI_CH3_PortFnsInit(MPIDI_PortFns * portFns)
{
    MPL_UNREFERENCED_ARG(portFns);
    return MPI_SUCCESS;
}

int MPIDI_CH3_PG_Init(MPIDI_PG_t * pg)
{
    MPL_UNREFERENCED_ARG(pg);
    return MPI_SUCCESS;
}

int MPIDI_CH3_PG_Destroy(MPIDI_PG_t * pg)
{
    MPL_UNREFERENCED_ARG(pg);
    return MPI_SUCCESS;
}

int MPIDI_CH3_VC_Init(MPIDI_VC_t * vc)
{
    int mpi_errno = MPI_SUCCESS;

    memset(&vc->ch, 0, sizeof(vc->ch));
    vc->ch.pkt = MPL_malloc(sizeof(MPIDI_CH3_Pkt_t), MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(vc->ch.pkt == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIDI_CH3I_link(vc)->xc.state = RDMA_CONN_IDLE;
    MPIDI_CH3I_link(vc)->xc.owner = vc;
    MPIDI_CH3I_link(vc)->fail_reads = vc->pg != NULL;      /* rdma_owner.c: and accepted VCs */
    MPIDI_CH3I_Rndv_init(vc, NULL);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_CH3_VC_Destroy(MPIDI_VC_t * vc)
{
    MPIDI_CH3I_RDMA_vc_destroy(vc);
    MPIDI_CH3I_Owed_end(vc, MPI_SUCCESS);
    MPL_free(vc->ch.pkt);
    vc->ch.pkt = NULL;
    return MPI_SUCCESS;
}

#ifdef MPL_USE_DBG_LOGGING
const char *MPIDI_CH3_VC_GetStateString(MPIDI_VC_t * vc)
{
    static const char *names[] = { "idle", "connecting", "ready", "closed", "failed" };
    return names[MPIDI_CH3I_link(vc)->xc.state];
}
#endif
