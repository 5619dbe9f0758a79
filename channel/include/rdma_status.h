/*
 * rdma_status: the one status type of the plain-C modules (ring, rendezvous,
 * rcache, memev, transports, channel core).  Plain C, no MPICH.
 *
 * A call returns RDMA_OK or a negative rdma_status_t; where the caller needs
 * to know why, the failing call also leaves a one-line diagnosis (naming the
 * peer, the device, the limit, the variable...) in a message buffer owned by
 * the call site (open's err argument), the connection (rdma_conn_t.why) or
 * the transport (its error() op).  The channel turns a status and its line
 * into an mpi_errno in exactly one place, rdma_mpi_errno() in
 * rdma_channel.c, at the CH3 boundary.
 */
#ifndef RDMA_STATUS_H_INCLUDED
#define RDMA_STATUS_H_INCLUDED

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

typedef enum rdma_status {
    RDMA_OK = 0,
    RDMA_ERR_INVAL = -1,        /* bad argument or configuration */
    RDMA_ERR_NOMEM = -2,        /* memory, memlock or device limits */
    RDMA_ERR_NODEV = -3,        /* no usable device */
    RDMA_ERR_NOSYS = -4,        /* no such mechanism here (userfaultfd...) */
    RDMA_ERR_SYS = -5,          /* a system call failed */
    RDMA_ERR_PEER = -6,         /* a peer is unreachable, dead or refused us */
    RDMA_ERR_XPORT = -7,        /* a transport operation failed */
    RDMA_ERR_PROTO = -8,        /* corrupt frame: protocol violation */
    RDMA_ERR_REG = -9,          /* memory registration refused */
    RDMA_ERR_REFUSED = -10      /* not possible on this path (no harm done:
                                 * the caller takes another one) */
} rdma_status_t;

/* The per-message path's functions (a send, a progress pass, an arrival):
 * GCC puts them together in .text.hot, 4 pages instead of about 13 spread
 * through libmpi (docs/results/verbs-vm.md, the verbs latency analysis). */
#define RDMA_HOT __attribute__ ((hot))

/* Room for one diagnosis line. */
enum { RDMA_MSG_LEN = 320 };

/* Short name of a status ("peer unreachable or dead"...). */
static inline const char *rdma_status_str(rdma_status_t st)
{
    static const char *const name[] = {
        "success", "invalid argument or configuration", "out of memory or limits",
        "no usable device", "mechanism unavailable", "system call failed",
        "peer unreachable or dead", "transport failure", "protocol violation",
        "registration refused", "refused"
    };
    return st <= 0 && st >= RDMA_ERR_REFUSED ? name[-st] : "unknown status";
}

/* Write a one-line diagnosis into msg[len]; returns st (for
 * `return rdma_say(...)`). */
static inline rdma_status_t __attribute__((format(printf, 4, 5)))
    rdma_say(char *msg, size_t len, rdma_status_t st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return st;
}

#endif /* RDMA_STATUS_H_INCLUDED */
