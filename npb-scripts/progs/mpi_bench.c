/* mpi_bench.c -- point-to-point micro-benchmarks between two MPI ranks.
 *
 *   mpiexec -n 2 mpi_bench [--min SIZE] [--max SIZE] [--steps pow2|5pct]
 *       [--reps R] [--window W]
 *       [--tests latency,bw,bibw,msgrate,spectrum,memcpy,copylimit]
 *       [--spectrum N] [--first-touch] [--alloc-mem] [--vector] [--iters N]
 *       [--warmup N]
 *
 * Tests (rank 0 <-> rank 1):
 *   latency  ping-pong; time per message is half a round trip
 *   bw       rank 0 posts W MPI_Isend, rank 1 W MPI_Irecv, then a 0-byte ack
 *   bibw     both ranks post W MPI_Irecv and W MPI_Isend at once
 *   msgrate  rank 0 sends W blocking MPI_Send, rank 1 W MPI_Recv, then an ack
 *   spectrum buffer-reuse spectrum (P2): ping-pong over N buffers, each
 *            on its own pages, buffer i used i times (round k uses buffers
 *            k..N); N = --spectrum (100), fewer where one pass would move
 *            more than 1 GiB.  Only on request; ignores --first-touch.
 *   memcpy   rank 0 copies SIZE bytes between its two buffers (one core's
 *            copy, what a one-way message of SIZE is compared to)
 *   copylimit latency and memcpy at each size, one after the other, then
 *            a comment "# copylimit SIZE: ..." with the message's one-way
 *            bandwidth (SIZE / half a round trip) over memcpy's
 * Each measurement runs warm-up iterations (not timed) then iterations
 * scaled with the size; it is repeated R times and the median is printed.
 * --iters and --warmup fix both counts instead (e.g. --tests latency
 * --iters 2000 --warmup 200 --reps 1: the first 2,000 round trips of a
 * connection after 200 untimed ones).
 * With --first-touch every iteration uses freshly malloc'ed buffers,
 * touched once before the (per-iteration, barrier-aligned) timed part;
 * otherwise the same buffers serve every iteration.  With --alloc-mem
 * the message buffers come from MPI_Alloc_mem instead of malloc.  With
 * --vector (latency only) a message of SIZE bytes is non-contiguous: 1 KiB
 * blocks 2 KiB apart (MPI_Type_vector, the last block shorter), in
 * buffers of twice the size.
 *
 * Output: comment lines starting with '#', then one line per test and size
 * under the header "# test size_bytes median_us median_MBps", where
 * median_us is the time per message and median_MBps the bytes moved per
 * second (MB = 10^6 B).
 */
#include <malloc.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_ITERS 3
#define MAX_MSGS 4000                  /* messages per measurement, at most */
#define TARGET_BYTES (64UL << 20)      /* bytes per measurement, roughly */
#define WINDOW_CAP (64UL << 20)        /* bytes in flight per window, at most */
#define SIZE_LIMIT (1UL << 30)

struct test {
    const char *name;
    void (*kernel)(char *s, char *r, size_t n, int w);
    int windowed;      /* one iteration sends a window of w messages */
    int msgs;          /* messages per window slot (2: both directions) */
};

static struct {
    size_t min, max;
    int pct5, reps, window, first_touch, spectrum;
    int iters, warmup; /* > 0 (>= 0): fixed counts per measurement */
    unsigned tests;    /* bit i: tests[i] selected */
    int alloc_mem;     /* buffers from MPI_Alloc_mem */
    int vector;        /* messages of 1 KiB blocks 2 KiB apart */
} opt = {1, 64UL << 20, 0, 5, 64, 0, 100, 0, -1, 0xfU, 0, 0};

static int rank;
static MPI_Datatype vec = MPI_DATATYPE_NULL;    /* --vector: the size measured */
static MPI_Request *reqs;
static MPI_Status *stats;   /* not MPI_STATUSES_IGNORE: gcc 12 warns on it */

/* An error of this rank alone. */
static void die(const char *msg)
{
    fprintf(stderr, "mpi_bench: rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* An error every rank finds (options): a clean exit, as MPI_Abort may lose
 * the message on its way through mpiexec. */
static void die_all(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "mpi_bench: %s\n", msg);
    MPI_Finalize();
    exit(2);
}

static void ack(int from)
{
    if (rank == from)
        MPI_Send(NULL, 0, MPI_BYTE, 1 - from, 2, MPI_COMM_WORLD);
    else
        MPI_Recv(NULL, 0, MPI_BYTE, from, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void k_latency(char *s, char *r, size_t n, int w)
{
    int c = opt.vector ? 1 : (int)n;
    MPI_Datatype t = opt.vector ? vec : MPI_BYTE;

    (void)w;
    if (rank == 0) {
        MPI_Send(s, c, t, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(r, c, t, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(r, c, t, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(s, c, t, 0, 1, MPI_COMM_WORLD);
    }
}

/* --vector: vec for n bytes, 1 KiB blocks at every 2 KiB (a vector type,
 * and the last, shorter block in a struct with it). */
static void vector_make(size_t n)
{
    int k = (int)(n / 1024), rem = (int)(n % 1024), len[2] = {1, rem};
    MPI_Aint at[2] = {0, 2048 * (MPI_Aint)k};
    MPI_Datatype full, parts[2];

    MPI_Type_vector(k, 1024, 2048, MPI_BYTE, &full);
    if (rem) {
        parts[0] = full, parts[1] = MPI_BYTE;
        MPI_Type_create_struct(2, len, at, parts, &vec);
        MPI_Type_free(&full);
    } else {
        vec = full;
    }
    MPI_Type_commit(&vec);
}

static void k_bw(char *s, char *r, size_t n, int w)
{
    for (int i = 0; i < w; i++) {
        if (rank == 0)
            MPI_Isend(s, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &reqs[i]);
        else
            MPI_Irecv(r + i * n, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &reqs[i]);
    }
    MPI_Waitall(w, reqs, stats);
    ack(1);
}

static void k_bibw(char *s, char *r, size_t n, int w)
{
    int peer = 1 - rank;
    for (int i = 0; i < w; i++)
        MPI_Irecv(r + i * n, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &reqs[i]);
    for (int i = 0; i < w; i++)
        MPI_Isend(s, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &reqs[w + i]);
    MPI_Waitall(2 * w, reqs, stats);
}

static void k_msgrate(char *s, char *r, size_t n, int w)
{
    for (int i = 0; i < w; i++) {
        if (rank == 0)
            MPI_Send(s, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        else
            MPI_Recv(r, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    ack(1);
}

/* One core's copy (rank 0; rank 1 waits in the next barrier). */
static void k_memcpy(char *s, char *r, size_t n, int w)
{
    (void)w;
    if (rank == 0) {
        memcpy(r, s, n);
        __asm__ volatile("" : : "r"(r) : "memory");     /* keep the copy */
    }
}

/* The spectrum's buffers: pool[2i] to send, pool[2i+1] to receive. */
static char **pool;
static int pool_n;

static void k_spectrum(char *s, char *r, size_t n, int w)
{
    (void)s, (void)r, (void)w;
    for (int k = 0; k < pool_n; k++)
        for (int i = k; i < pool_n; i++)
            k_latency(pool[2 * i], pool[2 * i + 1], n, 1);
}

/* Allocate the pool for size n (separate pages, touched); returns the
 * ping-pongs of one pass, N(N+1)/2. */
static int spectrum_setup(size_t n)
{
    int N = opt.spectrum;
    while (N > 2 && (size_t)N * (N + 1) / 2 * n > (1UL << 30))
        N--;
    pool = calloc(2 * (size_t)N, sizeof *pool);
    if (!pool)
        die("out of memory");
    for (int i = 0; i < 2 * N; i++) {
        if (posix_memalign((void **)&pool[i], 4096, n))
            die("out of memory");
        memset(pool[i], i & 1 ? 0 : 'a', n);
    }
    pool_n = N;
    return N * (N + 1) / 2;
}

static void spectrum_free(void)
{
    for (int i = 0; i < 2 * pool_n; i++)
        free(pool[i]);
    free(pool);
    pool = NULL;
    pool_n = 0;
}

static const struct test tests[] = {
    {"latency", k_latency, 0, 2},
    {"bw", k_bw, 1, 1},
    {"bibw", k_bibw, 1, 2},
    {"msgrate", k_msgrate, 1, 1},
    {"spectrum", k_spectrum, 0, 2},
    {"memcpy", k_memcpy, 0, 1},
    {"copylimit", NULL, 0, 0},  /* latency, then memcpy: see main */
};
#define NTESTS (int)(sizeof tests / sizeof *tests)
enum { T_LATENCY = 0, T_SPECTRUM = 4, T_MEMCPY = 5, T_COPYLIMIT = 6 };   /* tests[] rows */

/* Parse "64M", "1KiB", "4096": binary suffixes K, M, G. */
static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    }
    if (end == s || (*end && strcmp(end, "iB") && strcmp(end, "B")))
        die_all("bad size (examples: 8, 64K, 16M)");
    v <<= shift;
    if (v < 1 || v > SIZE_LIMIT)
        die_all("sizes must be between 1 B and 1 GiB");
    return (size_t)v;
}

static int parse_int(const char *s, int lo)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > 1000000)
        die_all("bad number in the options");
    return (int)v;
}

/* "latency,bw" -> bit mask over tests[]. */
static unsigned parse_tests(const char *list)
{
    unsigned mask = 0;
    for (const char *p = list; *p; p += *p == ',') {
        size_t len = strcspn(p, ",");
        int i = 0;
        while (i < NTESTS && (strlen(tests[i].name) != len || strncmp(p, tests[i].name, len)))
            i++;
        if (i == NTESTS)
            die_all("--tests: a comma-separated list of latency, bw, bibw, msgrate, spectrum, "
                    "memcpy, copylimit");
        mask |= 1U << i;
        p += len;
    }
    return mask;
}

static void usage(int status)
{
    if (rank == 0)
        fputs("usage: mpiexec -n 2 mpi_bench [--min SIZE] [--max SIZE] [--steps pow2|5pct]\n"
              "       [--reps R] [--window W]\n"
              "       [--tests latency,bw,bibw,msgrate,spectrum,memcpy,copylimit]\n"
              "       [--spectrum N] [--first-touch] [--alloc-mem] [--vector] [--iters N]\n"
              "       [--warmup N]\n",
              status ? stderr : stdout);
    MPI_Finalize();
    exit(status);
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help"))
            usage(0);
        else if (!strcmp(a, "--first-touch"))
            opt.first_touch = 1;
        else if (!strcmp(a, "--alloc-mem"))
            opt.alloc_mem = 1;
        else if (!strcmp(a, "--vector"))
            opt.vector = 1;
        else if (!v)
            usage(1);
        else if (!strcmp(a, "--min"))
            opt.min = parse_size(v), i++;
        else if (!strcmp(a, "--max"))
            opt.max = parse_size(v), i++;
        else if (!strcmp(a, "--reps"))
            opt.reps = parse_int(v, 1), i++;
        else if (!strcmp(a, "--window"))
            opt.window = parse_int(v, 1), i++;
        else if (!strcmp(a, "--iters"))
            opt.iters = parse_int(v, 1), i++;
        else if (!strcmp(a, "--warmup"))
            opt.warmup = parse_int(v, 0), i++;
        else if (!strcmp(a, "--spectrum"))
            opt.spectrum = parse_int(v, 2), i++;
        else if (!strcmp(a, "--steps") && (!strcmp(v, "pow2") || !strcmp(v, "5pct")))
            opt.pct5 = !strcmp(v, "5pct"), i++;
        else if (!strcmp(a, "--tests"))
            opt.tests = parse_tests(v), i++;
        else
            usage(1);
    }
    if (opt.min > opt.max)
        die_all("--min is larger than --max");
    if (opt.vector && opt.tests != 1U << T_LATENCY)
        die_all("--vector: only with --tests latency");
}

static size_t next_size(size_t n)
{
    size_t m = opt.pct5 ? (size_t)(n * 1.05) : 2 * n;
    return m > n ? m : n + 1;
}

static char *touched(size_t n, int fill)
{
    char *p = NULL;
    if (opt.alloc_mem)
        MPI_Alloc_mem((MPI_Aint)n, MPI_INFO_NULL, &p);
    else
        p = malloc(n);
    if (!p)
        die("out of memory");
    memset(p, fill, n);
    return p;
}

static void release(char *p)
{
    if (opt.alloc_mem && p)
        MPI_Free_mem(p);
    else
        free(p);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds per iteration for one repetition (meaningful on rank 0). */
static double one_rep(const struct test *t, size_t n, int w, int warm, int iters,
                      char *s, char *r)
{
    size_t span = opt.vector ? 2 * n : n, rbytes = t->windowed ? n * w : span;
    double total = 0, t0;

    if (!opt.first_touch) {
        for (int i = 0; i < warm; i++)
            t->kernel(s, r, n, w);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            t->kernel(s, r, n, w);
        return (MPI_Wtime() - t0) / iters;
    }
    /* Buffers are freed only after the repetition, so that none is reused. */
    char **fresh = malloc(2 * (size_t)(warm + iters) * sizeof *fresh);
    if (!fresh)
        die("out of memory");
    for (int i = 0; i < warm + iters; i++) {
        fresh[2 * i] = touched(span, 'a' + i % 26);
        fresh[2 * i + 1] = touched(rbytes, 0);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        t->kernel(fresh[2 * i], fresh[2 * i + 1], n, w);
        if (i >= warm)
            total += MPI_Wtime() - t0;
    }
    for (int i = 0; i < 2 * (warm + iters); i++)
        release(fresh[i]);
    free(fresh);
    return total / iters;
}

/* Prints t's row for size n; returns the median time per message (rank 0). */
static double measure(const struct test *t, size_t n, double *times)
{
    int w = 1;
    if (t->windowed) {
        size_t fit = WINDOW_CAP / n;
        w = fit < 1 ? 1 : fit < (size_t)opt.window ? (int)fit : opt.window;
    } else if (t->kernel == k_spectrum) {
        w = spectrum_setup(n);  /* ping-pongs per pass */
    }
    size_t msgs = (size_t)w * t->msgs, by_bytes = TARGET_BYTES / (msgs * n);
    size_t by_msgs = MAX_MSGS / msgs, iters = by_bytes < by_msgs ? by_bytes : by_msgs;
    if (iters < MIN_ITERS)
        iters = MIN_ITERS;
    if (opt.iters > 0)
        iters = (size_t)opt.iters;
    int warm = opt.warmup >= 0 ? opt.warmup : iters / 10 > 0 ? (int)iters / 10 : 1;
    char *s = NULL, *r = NULL;
    size_t span = opt.vector ? 2 * n : n;

    if (opt.vector)
        vector_make(n);
    if (!opt.first_touch) {
        s = touched(span, 'a');
        r = touched(t->windowed ? n * w : span, 0);
    }
    for (int k = 0; k < opt.reps; k++)
        times[k] = one_rep(t, n, w, warm, (int)iters, s, r);
    release(s);
    release(r);
    if (opt.vector)
        MPI_Type_free(&vec);
    spectrum_free();
    if (rank != 0)
        return 0;
    qsort(times, opt.reps, sizeof *times, cmp_double);
    double med = opt.reps % 2 ? times[opt.reps / 2]
                              : (times[opt.reps / 2 - 1] + times[opt.reps / 2]) / 2;
    double per_msg = med / msgs;
    printf("%-8s %10zu %12.3f %12.2f\n", t->name, n, per_msg * 1e6, n / per_msg / 1e6);
    fflush(stdout);
    return per_msg;
}

/* The copy limit at size n: a one-way message against one core's memcpy,
 * measured back to back. */
static void copylimit(size_t n, double *times)
{
    double msg = measure(&tests[T_LATENCY], n, times);
    double cpy = measure(&tests[T_MEMCPY], n, times);

    if (rank == 0)
        printf("# copylimit %zu: one-way %.0f MB/s, memcpy %.0f MB/s, ratio %.2f\n", n,
               n / msg / 1e6, n / cpy / 1e6, cpy / msg);
}

static void print_header(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    for (char *line = strtok(lib, "\n"); line; line = strtok(NULL, "\n"))
        if (line == lib || strstr(line, "Device"))
            printf("# library: %s\n", line);
    printf("# mpi_bench: reps %d (median), window %d (at most %lu MiB per window), "
           "steps %s, buffers %s%s%s\n", opt.reps, opt.window, WINDOW_CAP >> 20,
           opt.pct5 ? "5pct" : "pow2", opt.first_touch ? "first-touch" : "reused",
           opt.alloc_mem ? " from MPI_Alloc_mem" : "",
           opt.vector ? ", messages of 1 KiB blocks 2 KiB apart" : "");
    if (opt.tests & 1U << T_SPECTRUM)
        printf("# spectrum: up to %d buffers on separate pages, buffer i used i times\n",
               opt.spectrum);
    printf("# median_us: time per message (latency: half a round trip; memcpy: one copy); "
           "median_MBps: bytes moved per second, MB = 10^6 B\n");
    printf("# test size_bytes median_us median_MBps\n");
}

int main(int argc, char **argv)
{
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    parse_args(argc, argv);
    if (size != 2)
        die_all("run with exactly 2 ranks (mpiexec -n 2)");
    if (opt.first_touch)  /* fixed threshold: large buffers are fresh mmaps */
        mallopt(M_MMAP_THRESHOLD, 256 * 1024);

    reqs = malloc(2 * (size_t)opt.window * sizeof *reqs);
    stats = malloc(2 * (size_t)opt.window * sizeof *stats);
    double *times = malloc(opt.reps * sizeof *times);
    if (!reqs || !stats || !times)
        die("out of memory");
    if (rank == 0)
        print_header();
    for (int i = 0; i < NTESTS; i++) {
        if (!(opt.tests & 1U << i))
            continue;
        for (size_t n = opt.min; n <= opt.max; n = next_size(n))
            if (i == T_COPYLIMIT)
                copylimit(n, times);
            else
                measure(&tests[i], n, times);
    }
    free(reqs);
    free(stats);
    free(times);
    MPI_Finalize();
    return 0;
}
