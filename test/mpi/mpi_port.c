/*
 * mpi_port: connect/accept between two separately launched jobs (no shared
 * PMI KVS), the port name passed through a file.
 *   mpi_port serve FILE      open a port, write its name to FILE, accept
 *                            one connection, exchange BYTES both ways
 *                            verified, disconnect; prints one TAP line
 *   mpi_port connect FILE    connect to the port in FILE, same exchange
 *   mpi_port forge FILE      connect with the port's token changed: must be
 *                            refused; prints one TAP line
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mpi_tap.h"

#define BYTES (1 << 20)

static long exchange(MPI_Comm inter, unsigned mine, unsigned theirs)
{
    unsigned char *out = malloc(BYTES), *in = calloc(1, BYTES);
    MPI_Request rq[2];
    MPI_Status st[2];
    long bad;

    fill(out, BYTES, mine);
    MPI_Irecv(in, BYTES, MPI_BYTE, 0, 5, inter, &rq[0]);
    MPI_Isend(out, BYTES, MPI_BYTE, 0, 5, inter, &rq[1]);
    MPI_Waitall(2, rq, st);
    bad = (long) bad_bytes(in, BYTES, theirs);
    free(out);
    free(in);
    return bad;
}

static void read_port(const char *file, char *port)
{
    FILE *f = NULL;
    int i;

    for (i = 0; i < 600 && !(f = fopen(file, "r")); i++)
        usleep(100000);
    if (!f || !fgets(port, MPI_MAX_PORT_NAME, f)) {
        fprintf(stderr, "mpi_port: no port name in %s\n", file);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(f);
    port[strcspn(port, "\n")] = '\0';
}

/* Change one hex digit of the token in the port name. */
static void forge(char *port)
{
    char *t = strstr(port, "token:");

    if (!t) {
        fprintf(stderr, "mpi_port: no token in %s\n", port);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    t += 6;
    *t = *t == '0' ? '1' : '0';
}

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME], tmp[4096], msg[MPI_MAX_ERROR_STRING];
    MPI_Comm inter;
    int rc, len, cls;
    FILE *f;

    if (argc != 3) {
        fprintf(stderr, "usage: mpi_port serve|connect|forge FILE\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    if (!strcmp(argv[1], "serve")) {
        MPI_Open_port(MPI_INFO_NULL, port);
        snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
        f = fopen(tmp, "w");
        fprintf(f, "%s\n", port);
        fclose(f);
        rename(tmp, argv[2]);
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        rc = exchange(inter, 1, 2) != 0;
        MPI_Comm_disconnect(&inter);
        MPI_Close_port(port);
        printf("%s - accepted a job launched apart: 1 MiB both ways verified\n",
               rc ? "not ok" : "ok");
    } else {
        read_port(argv[2], port);
        if (!strcmp(argv[1], "forge")) {
            forge(port);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
            MPI_Error_class(rc, &cls);
            MPI_Error_string(rc, msg, &len);
            printf("%s - a port name with a forged token is refused (MPI_ERR_PORT)\n",
                   cls == MPI_ERR_PORT ? "ok" : "not ok");
            if (cls != MPI_ERR_PORT)
                printf("# %s\n", msg);
            MPI_Finalize();
            return 0;
        }
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        rc = exchange(inter, 2, 1) != 0;
        MPI_Comm_disconnect(&inter);
        if (rc)
            fprintf(stderr, "mpi_port: data from the server differs\n");
    }
    MPI_Finalize();
    return rc;
}
