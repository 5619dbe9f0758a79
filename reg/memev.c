/*
 * memev: memory release events from a userfaultfd (design in memev.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include "memev.h"

/* Newer than some distributions' headers; the values are kernel ABI. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

#define RING_SIZE 1024u         /* power of two */
#define READ_BATCH 64           /* messages per read() */
#define FEATURES (UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | \
                  UFFD_FEATURE_EVENT_REMAP)

typedef struct range {
    uintptr_t start;
    size_t len;
} range_t;

static struct {
    int uffd, stopfd;           /* -1: closed */
    uintptr_t pagemask;
    pthread_t monitor;
    /* written by the monitor */
    _Alignas(64) _Atomic uint32_t seq;  /* odd: read() and pushes under way */
    _Atomic unsigned head;
    atomic_int overflow;        /* set by the monitor, cleared by drain */
    /* written by memev_drain */
    _Alignas(64) _Atomic unsigned tail;
    range_t ring[RING_SIZE];
} mv = {.uffd = -1,.stopfd = -1 };

static int atfork_done;

/* Monitor only: publish a range, or flag its loss when the ring is full. */
static void push(uintptr_t start, size_t len)
{
    unsigned h = atomic_load_explicit(&mv.head, memory_order_relaxed);

    if (h - atomic_load_explicit(&mv.tail, memory_order_acquire) == RING_SIZE) {
        atomic_store_explicit(&mv.overflow, 1, memory_order_release);
        return;
    }
    mv.ring[h % RING_SIZE] = (range_t) { start, len };
    atomic_store_explicit(&mv.head, h + 1, memory_order_release);
}

static void handle(const struct uffd_msg *m)
{
    struct uffdio_writeprotect wp;

    switch (m->event) {
    case UFFD_EVENT_UNMAP:
    case UFFD_EVENT_REMOVE:
        push(m->arg.remove.start, m->arg.remove.end - m->arg.remove.start);
        break;
    case UFFD_EVENT_REMAP:     /* the watch moves along to arg.remap.to */
        push(m->arg.remap.from, m->arg.remap.len);
        break;
    case UFFD_EVENT_PAGEFAULT:
        /* Not expected (nothing is write-protected), but a fault would
         * block its thread for good: unprotect the page, which wakes it. */
        wp.range.start = m->arg.pagefault.address & ~mv.pagemask;
        wp.range.len = mv.pagemask + 1;
        wp.mode = 0;
        ioctl(mv.uffd, UFFDIO_WRITEPROTECT, &wp);
        break;
    }
}

/* One read() and its pushes, bracketed by seq (see "Ordering" in memev.h). */
static void read_events(uint32_t * seq)
{
    struct uffd_msg msg[READ_BATCH];
    ssize_t i, n;

    atomic_store_explicit(&mv.seq, ++*seq, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    n = read(mv.uffd, msg, sizeof(msg)) / (ssize_t) sizeof(msg[0]);
    for (i = 0; i < n; i++)
        handle(&msg[i]);
    atomic_store_explicit(&mv.seq, ++*seq, memory_order_release);
    syscall(SYS_futex, &mv.seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void *monitor(void *unused)
{
    struct pollfd pfd[2] = { {mv.uffd, POLLIN, 0}, {mv.stopfd, POLLIN, 0} };
    uint32_t seq = 0;

    (void) unused;
    for (;;) {
        if (poll(pfd, 2, -1) <= 0)
            continue;           /* EINTR at most: signals are blocked */
        if (pfd[1].revents)
            return NULL;
        read_events(&seq);
    }
}

/* Wait until a read()-and-push bracket seen under way has ended. */
static void wait_monitor(void)
{
    uint32_t s = atomic_load_explicit(&mv.seq, memory_order_acquire);

    if (s & 1)
        while (atomic_load_explicit(&mv.seq, memory_order_acquire) == s)
            syscall(SYS_futex, &mv.seq, FUTEX_WAIT_PRIVATE, s, NULL, NULL, 0);
}

/* The child has no monitor: drop the inherited descriptors (memev.h). */
static void atfork_child(void)
{
    if (mv.uffd < 0)
        return;
    close(mv.uffd);
    close(mv.stopfd);
    mv.uffd = mv.stopfd = -1;
}

/* A new userfaultfd, or -1 with the reason in err. */
static rdma_status_t uffd_new(char *err, size_t errlen)
{
    const int flags = O_CLOEXEC | O_NONBLOCK;
    int um = UFFD_USER_MODE_ONLY, fd, dev, e;
    const char *why;
    char devmsg[96] = "";

    fd = syscall(SYS_userfaultfd, flags | um);
    if (fd < 0 && errno == EINVAL) {    /* Linux < 5.11 */
        um = 0;
        fd = syscall(SYS_userfaultfd, flags);
    }
    if (fd >= 0)
        return fd;
    e = errno;
    if (e == EPERM) {           /* /dev/userfaultfd (Linux >= 6.1) may be allowed */
        dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        fd = dev < 0 ? -1 : ioctl(dev, USERFAULTFD_IOC_NEW, flags | um);
        snprintf(devmsg, sizeof(devmsg), "; /dev/userfaultfd: %s", strerror(errno));
        if (dev >= 0)
            close(dev);
        if (fd >= 0)
            return fd;
    }
    why = e == ENOSYS ? "no such system call: CONFIG_USERFAULTFD=n, or valgrind"
        : e != EPERM ? "unexpected"
        : um ? "denied by seccomp or an LSM, e.g. a container's default profile"
        : "vm.unprivileged_userfaultfd=0 and no UFFD_USER_MODE_ONLY before Linux 5.11";
    snprintf(err, errlen, "userfaultfd: %s (%s%s)", strerror(e), why, devmsg);
    return RDMA_ERR_SYS;
}

/* Enable the events; RDMA_ERR_NOSYS when the kernel lacks them or WP mode. */
static int uffd_api(int fd, char *err, size_t errlen)
{
    struct uffdio_api api = {.api = UFFD_API,.features = FEATURES };

    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        snprintf(err, errlen, "UFFDIO_API: %s (needs the UNMAP, REMOVE and REMAP"
                 " events, Linux >= 4.11)", strerror(errno));
        return RDMA_ERR_NOSYS;
    }
    if (!(api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
        snprintf(err, errlen, "userfaultfd: no write-protect mode (Linux >= 5.7"
                 " with CONFIG_HAVE_ARCH_USERFAULTFD_WP)");
        return RDMA_ERR_NOSYS;
    }
    return RDMA_OK;
}

/* Start the monitor with every signal blocked: handlers never run on it. */
static int start_monitor(char *err, size_t errlen)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&mv.monitor, NULL, monitor, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        snprintf(err, errlen, "memev: pthread_create: %s", strerror(rc));
    return rc ? RDMA_ERR_SYS : RDMA_OK;
}

rdma_status_t memev_open(char *err, size_t errlen)
{
    int rc;

    if (mv.uffd >= 0) {
        snprintf(err, errlen, "memev: already open");
        return RDMA_ERR_SYS;
    }
    if (!atfork_done && (rc = pthread_atfork(NULL, NULL, atfork_child)) != 0) {
        snprintf(err, errlen, "memev: pthread_atfork: %s", strerror(rc));
        return RDMA_ERR_SYS;
    }
    atfork_done = 1;
    mv.uffd = uffd_new(err, errlen);
    if (mv.uffd < 0)
        return RDMA_ERR_NOSYS;
    rc = uffd_api(mv.uffd, err, errlen);
    if (rc != RDMA_OK)
        goto fail_uffd;
    rc = RDMA_ERR_SYS;
    mv.stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (mv.stopfd < 0) {
        snprintf(err, errlen, "memev: eventfd: %s", strerror(errno));
        goto fail_uffd;
    }
    mv.pagemask = (uintptr_t) sysconf(_SC_PAGESIZE) - 1;
    atomic_store(&mv.seq, 0);
    atomic_store(&mv.head, 0);
    atomic_store(&mv.tail, 0);
    atomic_store(&mv.overflow, 0);
    rc = start_monitor(err, errlen);
    if (rc != RDMA_OK)
        goto fail_stop;
    return RDMA_OK;

  fail_stop:
    close(mv.stopfd);
    mv.stopfd = -1;
  fail_uffd:
    close(mv.uffd);
    mv.uffd = -1;
    return rc;
}

rdma_status_t memev_watch(const void *addr, size_t len)
{
    uintptr_t start = (uintptr_t) addr & ~mv.pagemask;
    uintptr_t end = ((uintptr_t) addr + len + mv.pagemask) & ~mv.pagemask;
    struct uffdio_register reg;

    if (mv.uffd < 0)
        return RDMA_ERR_NOSYS;
    if (len == 0 || end <= start)       /* empty or wraps */
        return RDMA_ERR_SYS;
    reg.range.start = start;
    reg.range.len = end - start;
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    return ioctl(mv.uffd, UFFDIO_REGISTER, &reg) < 0 ? RDMA_ERR_SYS : RDMA_OK;
}

int memev_drain(void (*fn)(void *arg, uintptr_t start, size_t len),
                void (*flush)(void *arg), void *arg)
{
    unsigned t, h;
    range_t r;
    int n = 0;

    if (mv.uffd < 0) {
        flush(arg);
        return 0;
    }
    wait_monitor();
    t = atomic_load_explicit(&mv.tail, memory_order_relaxed);
    h = atomic_load_explicit(&mv.head, memory_order_acquire);
    if (atomic_load_explicit(&mv.overflow, memory_order_relaxed)
        && atomic_exchange_explicit(&mv.overflow, 0, memory_order_acquire)) {
        /* flush covers everything released up to now, the ring too */
        atomic_store_explicit(&mv.tail, h, memory_order_release);
        flush(arg);
        return 0;
    }
    while (t != h) {
        r = mv.ring[t++ % RING_SIZE];
        atomic_store_explicit(&mv.tail, t, memory_order_release);
        fn(arg, r.start, r.len);
        n++;
    }
    return n;
}

void memev_close(void)
{
    uint64_t one = 1;

    if (mv.uffd < 0)
        return;
    while (write(mv.stopfd, &one, sizeof(one)) < 0 && errno == EINTR)
        continue;
    pthread_join(mv.monitor, NULL);
    close(mv.stopfd);
    close(mv.uffd);
    mv.uffd = mv.stopfd = -1;
}
