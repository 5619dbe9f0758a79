/*
 * rdma_thread: the channel's one background thread.  It sleeps in ppoll()
 * on the file descriptors its sources registered (no CPU while idle) and
 * runs a source when one of its fds is readable or the deadline that
 * source last returned has passed.  Sources today: the verbs connection
 * manager (answers peers and brings QPs to RTS while the application
 * computes, rdma_verbs_cm.c); the P4 registration helper is meant to
 * be another source of this thread, not a second thread.
 *
 * Plain C (pthreads), no MPICH.  Rules for a source's run():
 *   - it runs concurrently with every call of the owner, so it touches only
 *     state its source guards with its own lock (written next to the fields);
 *   - it never takes MPICH's locks and never allocates through MPICH (plain
 *     malloc only); it never blocks except on its own short lock;
 *   - it drains its own fds (non-blocking) before it returns.
 * All signals are blocked in the thread: they go to the application's.
 *
 * Fields: set by the owner before rdma_thread_start and then read-only,
 * except deadline[] (the thread's own) and stop_fd (written by the owner's
 * rdma_thread_stop, read by the thread).
 */
#ifndef RDMA_THREAD_H_INCLUDED
#define RDMA_THREAD_H_INCLUDED

#include <pthread.h>
#include "rdma_status.h"

enum { RDMA_THREAD_MAX_SRC = 4, RDMA_THREAD_MAX_FD = 3 };

/* Run once; returns the next deadline (CLOCK_MONOTONIC seconds, as
 * rdma_thread_now) or 0 for none. */
typedef double (*rdma_thread_run_t) (void *arg, double now);

typedef struct rdma_thread_src {
    int fd[RDMA_THREAD_MAX_FD];
    int nfd;
    rdma_thread_run_t run;
    void *arg;
} rdma_thread_src_t;

typedef struct rdma_thread {
    pthread_t tid;
    int running;                /* owner only */
    int stop_fd;                /* eventfd; -1 until started */
    int n;
    rdma_thread_src_t src[RDMA_THREAD_MAX_SRC];
    double deadline[RDMA_THREAD_MAX_SRC];       /* the thread's own */
    unsigned long runs;         /* the thread's own; read after stop (tests) */
} rdma_thread_t;

void rdma_thread_init(rdma_thread_t * t);
/* Before start; RDMA_ERR_INVAL when full or nfd is out of range. */
rdma_status_t rdma_thread_add(rdma_thread_t * t, const rdma_thread_src_t * src);
/* Start the thread if some source was added (else a no-op). */
rdma_status_t rdma_thread_start(rdma_thread_t * t, char *msg, size_t len);
/* Stop and join; a no-op when not running.  Sources are not run after. */
void rdma_thread_stop(rdma_thread_t * t);
double rdma_thread_now(void);

#endif /* RDMA_THREAD_H_INCLUDED */
