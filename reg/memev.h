/*
 * memev: memory release events for the registration cache.
 *
 * A registration pins the physical pages behind a virtual range.  Once the
 * range is unmapped or its pages are given back to the OS, the next use of
 * the same addresses gets new pages and the cached registration is stale
 * (silent corruption).  memev reports every such release of a watched range:
 * munmap, mmap(MAP_FIXED) over it, mremap (move or shrink), madvise
 * (DONTNEED, FREE, REMOVE), brk shrink, and therefore also glibc's own
 * munmap of large chunks in free(), heap trimming and malloc_trim(), which
 * symbol interposition never sees.
 *
 * Mechanism: a Linux userfaultfd with the non-cooperative events UNMAP,
 * REMOVE and REMAP (not FORK: it needs CAP_SYS_PTRACE and we want the
 * child unwatched).  memev_watch registers the page-aligned range in
 * write-protect mode only.  Nothing is ever write-protected, so no fault is
 * ever raised and page faults run as usual (a MISSING registration would
 * make every first touch wait for us); the registration only subscribes the
 * range's VMAs to the events.  WP registration is accepted for private
 * anonymous memory, and for shmem and hugetlbfs where the kernel has
 * CONFIG_PTE_MARKER_UFFD_WP; other mappings (regular files, device memory,
 * a range already registered by another userfaultfd) are refused and
 * memev_watch returns RDMA_ERR_SYS: the caller must not cache such a range.
 * Ranges are never unregistered: two cached regions may share pages, and
 * unregistering one would silently drop the other's watch.  The kernel
 * drops the registration of memory that goes away, and memev_close drops
 * the rest.
 *
 * Reports are page-aligned [start, start+len) and may exceed the watch (a
 * munmap reports the whole call's range) or repeat (a move reports REMAP and,
 * on recent kernels, UNMAP of the old range): invalidation is idempotent.
 * Cost: each release of watched memory waits for one monitor round trip
 * (two context switches); a watch of part of a mapping splits its VMA
 * (adjacent watched parts merge again), and past vm.max_map_count
 * memev_watch fails.
 *
 * Monitor: the kernel makes the releasing thread wait until the event has
 * been read from the userfaultfd (the release itself is already done when
 * it waits).  A monitor thread polls the userfaultfd and an eventfd (stop),
 * reads events and pushes [start, start+len) into a fixed single-producer /
 * single-consumer ring that memev_drain empties.  If the ring is full the
 * event is dropped and an overflow flag set; the next drain calls flush
 * instead of reporting ranges.  The monitor only calls poll, read, ioctl and
 * futex: it never allocates, frees, logs or takes a lock.  It must never
 * release watched memory itself, since it would wait for its own event.
 *
 * Ordering (monitor M, ring r, sequence counter seq, drain D):
 *   Ring: M writes the entry, then stores r.head (release); D loads r.head
 *   (acquire), reads the entry, then stores r.tail (release) before calling
 *   fn; M loads r.tail (acquire) before reusing a slot.
 *
 *   The race: the kernel wakes the releasing thread T as soon as M's read()
 *   dequeues the event, before read() even returns, so T can map the same
 *   addresses and call memev_drain before M has pushed the range.  M
 *   therefore brackets every read() and the pushes of what it read with
 *   seq: odd before read() (a seq_cst fence follows the store, so it is
 *   visible before the kernel can dequeue), even after the pushes (release),
 *   then FUTEX_WAKE.  The dequeue and T's wakeup are ordered by the kernel's
 *   event queue lock, so once T's release returns, T reads seq as that odd
 *   value s or a later one.  Any later memev_drain (in T or in a thread
 *   ordered after T) loads seq (acquire): a value other than s is a later
 *   store, made after the pushes with release, so the range is visible; s
 *   itself means M is still between read() and the end of its pushes, and D
 *   sleeps with FUTEX_WAIT until seq changes (no lost wakeup: the kernel
 *   rechecks the value).  One read() per bracket bounds that wait to one
 *   batch.  The common path costs D one load.  The overflow flag is set
 *   before the even store too, so a lost event is seen the same way.
 *
 * Not covered: the kernel releases memory before it queues the event, so a
 * thread that maps the same addresses while another thread's release is
 * still waiting for the monitor can see a stale cache entry.  This needs a
 * concurrent free and map of the same addresses (MPI_THREAD_MULTIPLE); no
 * userfaultfd monitor can close it.  madvise events come before the pages
 * are dropped, so a registration made during that madvise call is stale.
 *
 * Threads: memev_open and memev_close must not run concurrently with any
 * other call.  memev_watch may be called from any thread.  memev_drain has
 * a single consumer: callers serialise it (e.g. under the rcache's lock);
 * fn and flush may release memory (reported by a later drain) but must not
 * call memev_drain.
 *
 * fork: a child has no monitor.  Without EVENT_FORK the kernel drops the
 * child's registrations, and a pthread_atfork child handler closes the
 * inherited descriptors (otherwise a living child would keep the
 * userfaultfd open and the parent's releases would wait forever after
 * memev_close).  In the child memev is closed (fork by a raw clone or
 * syscall skips the handler: don't).
 *
 * Closed state: memev_watch returns RDMA_ERR_NOSYS and memev_drain calls flush
 * every time, since nothing is watched any more.
 */
#ifndef MEMEV_H_INCLUDED
#define MEMEV_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "rdma_status.h"


/* Start the monitor (one per process).  RDMA_ERR_NOSYS when userfaultfd or
 * its events are unavailable, RDMA_ERR_SYS for any other failure (already
 * open, no thread); on failure err holds a one-line reason. */
rdma_status_t memev_open(char *err, size_t errlen);

/* Watch the pages covering [addr, addr+len) until they are released or
 * memev_close.  RDMA_OK, RDMA_ERR_SYS when the range cannot be watched (do not
 * cache it), RDMA_ERR_NOSYS when closed.  Watch before registering. */
rdma_status_t memev_watch(const void *addr, size_t len);

/* Report every range released since the last call: fn(arg, start, len) per
 * range, or flush(arg) once (and no fn) if events were lost or memev is
 * closed.  Returns the number of fn calls. */
int memev_drain(void (*fn)(void *arg, uintptr_t start, size_t len),
                void (*flush)(void *arg), void *arg);

/* Stop and join the monitor and close the userfaultfd, which drops every
 * watch and releases any thread still waiting for its event. */
void memev_close(void);

#endif /* MEMEV_H_INCLUDED */
