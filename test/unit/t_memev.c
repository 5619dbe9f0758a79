/*
 * t_memev: unit tests of memev on the running kernel.
 *
 * Every release path is exercised for real (munmap, madvise, mremap, glibc
 * free/trim, brk, mmap over a mapping) and the ranges memev_drain reports are
 * compared with what was released.  Calls that could hang if memev were
 * wrong run in a thread joined with a timeout; alarm() bounds the rest.
 * Without a usable userfaultfd the whole test is skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include "memev.h"
#include "tap.h"

#define MAXEV 2048

static struct {
    uintptr_t start[MAXEV];
    size_t len[MAXEV];
    int n, flushes;
} ev;

static size_t pg;

static void on_range(void *arg, uintptr_t start, size_t len)
{
    (void) arg;
    if (ev.n < MAXEV) {
        ev.start[ev.n] = start;
        ev.len[ev.n] = len;
    }
    ev.n++;
}

static void on_flush(void *arg)
{
    (void) arg;
    ev.flushes++;
}

/* Forget earlier events, then collect what one memev_drain reports. */
static int drain(void)
{
    int n;

    ev.n = ev.flushes = 0;
    n = memev_drain(on_range, on_flush, NULL);
    return n == ev.n ? n : -1;
}

/* Every page of [s, s+len) lies in some reported range. */
static int covered(uintptr_t s, size_t len)
{
    uintptr_t a;
    int i;

    for (a = s & ~(pg - 1); a < s + len; a += pg) {
        for (i = 0; i < ev.n && i < MAXEV; i++)
            if (a >= ev.start[i] && a + pg <= ev.start[i] + ev.len[i])
                break;
        if (i == ev.n || i == MAXEV)
            return 0;
    }
    return 1;
}

static int overlaps(uintptr_t s, size_t len)
{
    int i;

    for (i = 0; i < ev.n && i < MAXEV; i++)
        if (ev.start[i] < s + len && s < ev.start[i] + ev.len[i])
            return 1;
    return 0;
}

/* Some reported range lies inside [s, s+len). */
static int inside(uintptr_t s, size_t len)
{
    int i;

    for (i = 0; i < ev.n && i < MAXEV; i++)
        if (ev.start[i] >= s && ev.start[i] + ev.len[i] <= s + len)
            return 1;
    return 0;
}

static int exactly(const void *p, size_t len)
{
    return ev.n == 1 && ev.start[0] == (uintptr_t) p && ev.len[0] == len;
}

/* Reported, maybe more than once, and nothing else. */
static int only(const void *p, size_t len)
{
    int i;

    for (i = 0; i < ev.n && i < MAXEV; i++)
        if (ev.start[i] != (uintptr_t) p || ev.len[i] != len)
            return 0;
    return ev.n > 0;
}

static char *map(size_t npages)
{
    char *p = mmap(NULL, npages * pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    memset(p, 1, npages * pg);
    return p;
}

/* --- calls that may block: run in a thread, join with a timeout ---------- */

typedef struct {
    pthread_t th;
    void *addr;
    size_t len;
} unmapper_t;

static void *unmap_main(void *arg)
{
    unmapper_t *u = arg;

    munmap(u->addr, u->len);
    return NULL;
}

static int unmap_start(unmapper_t * u, void *addr, size_t len)
{
    u->addr = addr;
    u->len = len;
    return pthread_create(&u->th, NULL, unmap_main, u) == 0;
}

/* 1 if the unmap finished within secs (joined), 0 if it still hangs. */
static int unmap_joined(unmapper_t * u, int secs)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += secs;
    return pthread_timedjoin_np(u->th, NULL, &ts) == 0;
}

/* --- tests ----------------------------------------------------------------- */

static void t_munmap(void)
{
    char *p = map(16);

    is_int(memev_watch(p, 16 * pg), RDMA_OK, "watch 16 anonymous pages");
    is_int(drain(), 0, "watching alone reports nothing");
    munmap(p + 6 * pg, 4 * pg);
    drain();
    ok(exactly(p + 6 * pg, 4 * pg), "munmap of 4 middle pages: exactly that range");
    is_int(ev.flushes, 0, "no flush");
    p[0] = p[15 * pg] = 2;      /* the rest is still usable: no fault blocks */
    is_int(drain(), 0, "writes to watched pages raise nothing");
    munmap(p, 16 * pg);
    drain();
}

static void t_madvise(void)
{
    char *p = map(4);

    memev_watch(p, 4 * pg);
    madvise(p + pg, pg, MADV_DONTNEED);
    drain();
    ok(exactly(p + pg, pg), "madvise(DONTNEED) of one page: reported");
    madvise(p + 2 * pg, pg, MADV_FREE);
    drain();
    ok(exactly(p + 2 * pg, pg), "madvise(FREE) of one page: reported");
    munmap(p, 4 * pg);
    drain();
}

static void t_mremap(void)
{
    char *p = map(4), *q = map(8), *r;

    memev_watch(p, 4 * pg);
    r = mremap(p, 4 * pg, 4 * pg, MREMAP_MAYMOVE | MREMAP_FIXED, q);
    drain();
    ok(r == q && only(p, 4 * pg), "mremap move: the old range is reported");
    diag("mremap move reported %d time(s) (REMAP; newer kernels add UNMAP)", ev.n);
    munmap(q + 2 * pg, 2 * pg);
    drain();
    ok(exactly(q + 2 * pg, 2 * pg), "the watch moved along with the pages");
    r = mremap(q, 2 * pg, pg, 0);
    drain();
    ok(r == q && exactly(q + pg, pg), "mremap shrink: the cut page is reported");
    munmap(q, 8 * pg);
    p = map(4);
    q = mmap(NULL, 8 * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memev_watch(p, 4 * pg);
    drain();
    r = mremap(p, 4 * pg, 4 * pg, MREMAP_MAYMOVE | MREMAP_DONTUNMAP | MREMAP_FIXED,
               q + 2 * pg);
    drain();
    ok(r == q + 2 * pg && only(p, 4 * pg),
       "mremap DONTUNMAP (pages leave, mapping stays): reported");
    munmap(p, 4 * pg);
    munmap(q, 8 * pg);
    drain();
}

/* The releasing thread waits for the monitor: no hang, range reported. */
static void t_thread_unmap(void)
{
    char *p = map(8);
    unmapper_t u;

    memev_watch(p, 8 * pg);
    if (!ok(unmap_start(&u, p, 8 * pg), "start an unmapping thread"))
        return;
    if (!ok(unmap_joined(&u, 10), "munmap in a second thread returns (main idle)"))
        pthread_join(u.th, NULL);
    drain();
    ok(exactly(p, 8 * pg), "its range is reported");
}

/* Memory released and mapped again at the same address: the very next drain
 * must report the old range (the seq handshake; see memev.h). */
static void t_same_address(void)
{
    enum { ROUNDS = 300 };
    char *p = map(16), *q;
    int i, missed = 0, watch_fail = 0;

    for (i = 0; i < ROUNDS; i++) {
        watch_fail += memev_watch(p, 16 * pg) != RDMA_OK;
        if (i & 1) {
            munmap(p, 16 * pg);
            q = mmap(p, 16 * pg, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        } else                  /* mapping over it unmaps it */
            q = mmap(p, 16 * pg, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        drain();
        missed += q != p || !covered((uintptr_t) p, 16 * pg);
        p[0] = 1;
    }
    is_int(watch_fail, 0, "re-watch each new mapping");
    is_int(missed, 0, "unmap/mmap-over at one address, drain at once: always reported");
    munmap(p, 16 * pg);
    drain();
}

static void t_overflow(void)
{
    enum { N = 1100 };          /* > ring size */
    char *p = map(N);
    int i;

    memev_watch(p, N * pg);
    for (i = 0; i < N; i++)
        munmap(p + i * pg, pg);
    is_int(drain(), 0, "more events than the ring holds: no ranges ...");
    is_int(ev.flushes, 1, "... but one flush");
    drain();
    ok(ev.n == 0 && ev.flushes == 0, "the next drain is clean again");
}

/* Pick a directory on a regular (not tmpfs) file system. */
static int disk_file(void)
{
    static const char *dirs[] = { "/var/tmp", ".", "/tmp" };
    char path[64];
    struct statfs sf;
    size_t i;
    int fd;

    for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (statfs(dirs[i], &sf) || sf.f_type == TMPFS_MAGIC)
            continue;
        snprintf(path, sizeof(path), "%s/t_memev.XXXXXX", dirs[i]);
        fd = mkstemp(path);
        if (fd < 0)
            continue;
        unlink(path);
        if (ftruncate(fd, 4 * pg) == 0)
            return fd;
        close(fd);
    }
    return -1;
}

static void t_file_mappings(void)
{
    int fd = disk_file(), rc;
    char *p;

    if (fd < 0) {
        skip("no regular file system for a file mapping");
        skip("no regular file system for a file mapping");
    } else {
        p = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        is_int(memev_watch(p, 4 * pg), RDMA_ERR_SYS, "shared file mapping: refused");
        munmap(p, 4 * pg);
        p = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        is_int(memev_watch(p, 4 * pg), RDMA_ERR_SYS, "private file mapping: refused");
        munmap(p, 4 * pg);
        close(fd);
    }
    /* shmem: WP registration needs CONFIG_PTE_MARKER_UFFD_WP */
    fd = memfd_create("t_memev", MFD_CLOEXEC);
    p = fd < 0 || ftruncate(fd, 4 * pg) ? MAP_FAILED :
        mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    rc = p == MAP_FAILED ? RDMA_ERR_SYS : memev_watch(p, 4 * pg);
    if (p != MAP_FAILED)
        munmap(p, 4 * pg);
    drain();
    if (rc == RDMA_OK)
        ok(exactly(p, 4 * pg), "shared memfd mapping: watched, its munmap reported");
    else
        ok(rc == RDMA_ERR_SYS, "shared memfd mapping: refused (kernel without WP on shmem)");
    diag("memfd MAP_SHARED watch: %s", rc == RDMA_OK ? "works" : "refused");
    if (fd >= 0)
        close(fd);
}

/* glibc returns a large chunk with munmap inside free(): no symbol hook sees
 * it, the kernel does. */
static void t_free(void)
{
    size_t sz = 8 << 20;
    char *p = malloc(sz);
    uintptr_t at = (uintptr_t) p;       /* p is not used after free */

    memset(p, 1, sz);
    is_int(memev_watch(p, sz), RDMA_OK, "watch an 8 MiB malloc chunk");
    drain();
    free(p);
    drain();
    ok(covered(at, sz), "free() of it: reported");
}

/* Heap top trimmed by free() (brk) and free chunks by malloc_trim (madvise). */
static void t_trim(void)
{
    size_t sz = 1 << 20;
    char *a = malloc(sz), *b, *c;
    uintptr_t at = (uintptr_t) a;       /* a and b are not used after free */

    memset(a, 1, sz);
    memev_watch(a, sz);
    drain();
    free(a);
    drain();
    ok(overlaps(at, sz), "free() trimming the heap top: reported");
    b = malloc(sz);
    c = malloc(sz / 4);         /* from the top: keeps b off it */
    memset(b, 1, sz);
    memev_watch(b, sz);
    at = (uintptr_t) b;
    ok(c > b, "heap layout: guard chunk above the trimmed one");
    free(b);
    drain();
    malloc_trim(0);
    drain();
    ok(inside(at, sz), "malloc_trim of a free chunk (madvise): reported");
    free(c);
}

/* brk shrink with sbrk(): nothing may call malloc while the break is ours. */
static void t_sbrk(void)
{
    char *cur = sbrk(0), *base = (char *) (((uintptr_t) cur + pg - 1) & ~(pg - 1));
    int grown, watched = 0, shrunk = 0, restored = 0;

    grown = sbrk(base - cur + 16 * pg) != (void *) -1;
    if (grown) {
        memset(base, 1, 16 * pg);
        watched = memev_watch(base, 16 * pg) == RDMA_OK;
        drain();
        sbrk(-8 * (intptr_t) pg);
        drain();
        shrunk = exactly(base + 8 * pg, 8 * pg);
        sbrk(-(base - cur + 8 * (intptr_t) pg));
        drain();
        restored = covered((uintptr_t) base, 8 * pg) && sbrk(0) == cur;
    }
    ok(grown && watched, "grow the break by 16 pages and watch them");
    ok(shrunk, "sbrk(-8 pages): exactly those pages reported");
    ok(restored, "sbrk back to the start: the rest reported");
}

/* The child has no monitor and no watches; a living child must not keep the
 * parent's userfaultfd open past memev_close. */
static void t_fork(void)
{
    char *p = map(4), *q = map(4), buf;
    int fds[2], status, rc;
    unmapper_t u;
    pid_t pid;

    memev_watch(p, 4 * pg);
    memev_watch(q, 4 * pg);
    if (!ok(pipe(fds) == 0, "pipe"))
        return;
    pid = fork();
    if (pid == 0) {
        close(fds[1]);
        drain();
        rc = ev.flushes == 1 && memev_watch(p, pg) == RDMA_ERR_NOSYS;
        munmap(p, 4 * pg);      /* unwatched here: must not block */
        while (read(fds[0], &buf, 1) < 0 && errno == EINTR)
            continue;
        _exit(rc ? 0 : 1);
    }
    close(fds[0]);
    memev_close();
    if (ok(unmap_start(&u, q, 4 * pg), "start an unmapping thread")) {
        rc = unmap_joined(&u, 5);
        ok(rc, "after memev_close, unmapping does not wait on a forked child");
        close(fds[1]);          /* child exits: releases the thread if stuck */
        if (!rc)
            pthread_join(u.th, NULL);
    } else
        close(fds[1]);
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "child: memev closed (drain flushes, watch ENOSYS), its munmap does not block");
    munmap(p, 4 * pg);
}

/* memev_close with events queued and watches left; then the closed state. */
static void t_close(void)
{
    char *p = map(4), *q = map(4), err[256];
    unmapper_t u;
    int i;

    is_int(memev_open(err, sizeof(err)), RDMA_OK, "reopen");
    memev_watch(p, 4 * pg);
    memev_watch(q, 4 * pg);
    for (i = 0; i < 4; i++)
        munmap(p + i * pg, pg);
    memev_close();
    if (ok(unmap_start(&u, q, 4 * pg), "start an unmapping thread")
        && !ok(unmap_joined(&u, 5), "unmapping a range watched before close returns"))
        pthread_join(u.th, NULL);
    drain();
    ok(ev.n == 0 && ev.flushes == 1,
       "memev_close with undrained events returns and drops them: drain calls flush");
    is_int(memev_watch(p, pg), RDMA_ERR_NOSYS, "closed: watch says ENOSYS");
}

static void t_reopen(void)
{
    char err[256];
    int i, good = 0;
    char *p;

    for (i = 0; i < 3; i++) {
        if (memev_open(err, sizeof(err)) != RDMA_OK) {
            diag("memev_open: %s", err);
            continue;
        }
        p = map(2);
        memev_watch(p, 2 * pg);
        munmap(p, 2 * pg);
        drain();
        good += covered((uintptr_t) p, 2 * pg) && ev.flushes == 0;
        memev_close();
    }
    is_int(good, 3, "open, watch, unmap, drain, close: three times");
}

int main(void)
{
    char err[256];
    int rc;

    alarm(120);
    pg = (size_t) sysconf(_SC_PAGESIZE);
    mallopt(M_MMAP_THRESHOLD, 4 << 20);         /* no dynamic threshold */
    rc = memev_open(err, sizeof(err));
    if (rc == RDMA_ERR_NOSYS) {
        printf("1..0 # SKIP %s\n", err);
        return 0;
    }
    if (!is_int(rc, RDMA_OK, "memev_open")) {
        diag("%s", err);
        return done_testing();
    }
    is_int(memev_open(err, sizeof(err)), RDMA_ERR_SYS, "a second open is refused");
    t_munmap();
    t_madvise();
    t_mremap();
    t_thread_unmap();
    t_same_address();
    t_overflow();
    t_file_mappings();
    t_free();
    t_trim();
    t_sbrk();
    t_fork();
    t_close();
    t_reopen();
    return done_testing();
}
