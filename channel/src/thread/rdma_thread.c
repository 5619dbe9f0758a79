/*
 * rdma_thread.c -- the channel's background thread (rdma_thread.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "rdma_thread.h"

double rdma_thread_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

void rdma_thread_init(rdma_thread_t * t)
{
    memset(t, 0, sizeof(*t));
    t->stop_fd = -1;
}

rdma_status_t rdma_thread_add(rdma_thread_t * t, const rdma_thread_src_t * src)
{
    if (t->running || t->n == RDMA_THREAD_MAX_SRC || src->nfd < 0
        || src->nfd > RDMA_THREAD_MAX_FD || !src->run)
        return RDMA_ERR_INVAL;
    t->src[t->n] = *src;
    t->deadline[t->n++] = 0;
    return RDMA_OK;
}

/* Fill the poll set (stop_fd first); returns the ppoll timeout. */
static struct timespec *rdma_thread_pollset(rdma_thread_t * t, struct pollfd *p, int *np,
                                            struct timespec *ts)
{
    double next = 0, wait;
    int i, j, n = 1;

    p[0] = (struct pollfd) { .fd = t->stop_fd, .events = POLLIN };
    for (i = 0; i < t->n; i++) {
        for (j = 0; j < t->src[i].nfd; j++)
            p[n++] = (struct pollfd) { .fd = t->src[i].fd[j], .events = POLLIN };
        if (t->deadline[i] > 0 && (next == 0 || t->deadline[i] < next))
            next = t->deadline[i];
    }
    *np = n;
    if (next == 0)
        return NULL;
    wait = next - rdma_thread_now();
    wait = wait > 0 ? wait : 0;
    ts->tv_sec = (time_t) wait;
    ts->tv_nsec = (long) ((wait - (double) ts->tv_sec) * 1e9);
    return ts;
}

static void *rdma_thread_main(void *arg)
{
    rdma_thread_t *t = arg;
    struct pollfd p[1 + RDMA_THREAD_MAX_SRC * RDMA_THREAD_MAX_FD];
    struct timespec ts, *tmo;
    int i, j, k, n;
    double now;

    for (;;) {
        tmo = rdma_thread_pollset(t, p, &n, &ts);
        if (ppoll(p, (nfds_t) n, tmo, NULL) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        now = rdma_thread_now();
        for (i = 0, k = 1; i < t->n; i++) {
            int due = t->deadline[i] > 0 && now >= t->deadline[i];
            for (j = 0; j < t->src[i].nfd; j++)
                due |= p[k++].revents != 0;
            if (due) {
                t->deadline[i] = t->src[i].run(t->src[i].arg, now);
                t->runs++;
            }
        }
    }
    return NULL;
}

rdma_status_t rdma_thread_start(rdma_thread_t * t, char *msg, size_t len)
{
    sigset_t all, old;
    int rc;

    if (t->running || t->n == 0)
        return RDMA_OK;
    t->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->stop_fd < 0)
        return rdma_say(msg, len, RDMA_ERR_SYS, "cannot start the channel thread: eventfd: %s",
                        strerror(errno));
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&t->tid, NULL, rdma_thread_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        close(t->stop_fd);
        t->stop_fd = -1;
        return rdma_say(msg, len, RDMA_ERR_SYS, "cannot start the channel thread: "
                        "pthread_create: %s", strerror(rc));
    }
    t->running = 1;
    return RDMA_OK;
}

void rdma_thread_stop(rdma_thread_t * t)
{
    uint64_t one = 1;

    if (!t->running)
        return;
    while (write(t->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
    pthread_join(t->tid, NULL);
    close(t->stop_fd);
    t->stop_fd = -1;
    t->running = 0;
}
