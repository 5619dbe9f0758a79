/*
 * t_thread: TAP test of the channel thread (rdma_thread.h) with eventfd
 * sources: a source runs when its fd is readable and when its deadline
 * passes, not otherwise (no CPU while idle), stop joins, bad sources are
 * refused, and the thread never takes the application's signals.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "rdma_thread.h"
#include "tap.h"

typedef struct src_state {
    int fd;
    volatile int runs;
    double next_in;             /* run returns now + next_in (0: none) */
    volatile pthread_t who;
} src_state_t;

static double src_run(void *arg, double now)
{
    src_state_t *s = arg;
    uint64_t n;

    while (read(s->fd, &n, sizeof(n)) > 0)
        ;
    s->who = pthread_self();
    __atomic_add_fetch(&s->runs, 1, __ATOMIC_SEQ_CST);
    return s->next_in > 0 ? now + s->next_in : 0;
}

static void poke(int fd)
{
    uint64_t one = 1;
    if (write(fd, &one, sizeof(one)) < 0)
        perror("write");
}

static void nap(double s)
{
    struct timespec ts = { (time_t) s, (long) ((s - (double) (time_t) s) * 1e9) };
    nanosleep(&ts, NULL);
}

static int wait_runs(src_state_t * s, int want, double limit)
{
    double end = rdma_thread_now() + limit;

    while (s->runs < want && rdma_thread_now() < end)
        nap(0.001);
    return s->runs;
}

static src_state_t st_a, st_b;
static volatile sig_atomic_t sig_in_thread, sig_seen;
static pthread_t thread_id;

static void on_usr1(int sig)
{
    (void) sig;
    sig_seen = 1;
    sig_in_thread = pthread_equal(pthread_self(), thread_id);
}

int main(void)
{
    rdma_thread_t t;
    rdma_thread_src_t a, b, bad;
    char msg[RDMA_MSG_LEN] = "";
    int runs;

    st_a.fd = eventfd(0, EFD_NONBLOCK);
    st_b.fd = eventfd(0, EFD_NONBLOCK);
    a = (rdma_thread_src_t) { {st_a.fd}, 1, src_run, &st_a };
    b = (rdma_thread_src_t) { {st_b.fd}, 1, src_run, &st_b };
    rdma_thread_init(&t);
    ok(rdma_thread_start(&t, msg, sizeof(msg)) == RDMA_OK && !t.running,
       "no source: no thread");
    bad = a;
    bad.nfd = RDMA_THREAD_MAX_FD + 1;
    ok(rdma_thread_add(&t, &bad) == RDMA_ERR_INVAL, "a source with too many fds is refused");
    ok(rdma_thread_add(&t, &a) == RDMA_OK && rdma_thread_add(&t, &b) == RDMA_OK,
       "two sources added");
    ok(rdma_thread_start(&t, msg, sizeof(msg)) == RDMA_OK && t.running, "thread started: %s",
       msg[0] ? msg : "ok");
    thread_id = t.tid;
    ok(rdma_thread_add(&t, &a) == RDMA_ERR_INVAL, "no source can be added once it runs");
    nap(0.2);
    ok(st_a.runs == 0 && st_b.runs == 0, "idle: no source runs without an event or deadline");
    poke(st_a.fd);
    ok(wait_runs(&st_a, 1, 5) == 1 && st_b.runs == 0, "a readable fd runs its source only");
    ok(pthread_equal(st_a.who, t.tid), "sources run in the channel thread");
    st_b.next_in = 0.05;
    poke(st_b.fd);
    runs = wait_runs(&st_b, 4, 5);
    ok(runs >= 4, "a returned deadline runs the source again without an event (%d runs)", runs);
    st_b.next_in = 0;
    nap(0.1);
    runs = st_b.runs;
    nap(0.2);
    ok(st_b.runs == runs, "no deadline returned: the source sleeps again");
    signal(SIGUSR1, on_usr1);
    kill(getpid(), SIGUSR1);
    nap(0.05);
    ok(sig_seen && !sig_in_thread, "a process signal is delivered to the application's thread");
    rdma_thread_stop(&t);
    ok(!t.running && t.stop_fd == -1, "stop joins the thread");
    runs = st_a.runs;
    poke(st_a.fd);
    nap(0.1);
    ok(st_a.runs == runs, "after stop no source runs");
    rdma_thread_stop(&t);
    ok(!t.running && t.stop_fd == -1 && st_a.runs == runs, "a second stop is a no-op");
    return done_testing();
}
