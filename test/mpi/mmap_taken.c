/*
 * mmap_taken.so -- LD_PRELOAD shim: every mmap at a given address with
 * MAP_FIXED_NOREPLACE fails with EEXIST, as when another thread of the
 * process mapped there since the program unmapped it.  Over verbs that
 * happens: the channel thread's SRQ and CQ resizes make the provider unmap
 * and map its queues again, and the kernel may place them in the hole a
 * test program's munmap just left.  The tests use it to check that
 * mpi_stress and mpi_large map elsewhere then instead of giving up on one
 * rank while the other waits for it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/types.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static void *(*real)(void *, size_t, int, int, int, off_t);

    if (addr && (flags & MAP_FIXED_NOREPLACE) == MAP_FIXED_NOREPLACE) {
        errno = EEXIST;
        return MAP_FAILED;
    }
    if (!real)
        real = (void *(*)(void *, size_t, int, int, int, off_t)) dlsym(RTLD_NEXT, "mmap");
    return real(addr, len, prot, flags, fd, off);
}
