#!/usr/bin/env bash
# The layering rules of channel/README.md, checked on the sources: calls go
# down only, every file does one job (at most ~600 lines), one status type
# in the plain-C modules, mpi_errno made in one place.
. "$(dirname "$0")/lib.sh"
plan 6
cd "$TOP" || exit 1
calls() {  # calls PATTERN FILES...: lines that call a function matching PATTERN
    local re=$1; shift
    grep -HnE "\b$re[a-z_]*[[:space:]]*\(" "$@" | grep -vE ':[0-9]+:[[:space:]]*(\*|/\*)'
}
up=$(calls '(rb_|zc_)' channel/src/rdma_xport*.[ch] channel/src/rdma_verbs*.[ch])
[ -z "$up" ]; ok $? "no transport calls the pipe or the rendezvous"
[ -z "$up" ] || echo "$up" | diag
glue=$(calls '(rb_|zc_|rdma_link_)' channel/src/ch3_*.c channel/include/*.h)
[ -z "$glue" ]; ok $? "the CH3 glue calls only the channel"
[ -z "$glue" ] || echo "$glue" | diag
back=$(calls 'zc_' ringbuf/*.[ch]; grep -Hn 'zc\.h\|rdma_' ringbuf/*.[ch] | grep '#include' | grep -v rdma_status.h)
[ -z "$back" ]; ok $? "the pipe knows nothing of the rendezvous or the transports"
[ -z "$back" ] || echo "$back" | diag
long=$(wc -l channel/src/*.[ch] channel/include/*.h ringbuf/*.[ch] zcopy/*.[ch] |
    awk '$2 != "total" && $1 > 600 { print $2 ": " $1 " lines" }')
[ -z "$long" ]; ok $? "no source file over 600 lines"
[ -z "$long" ] || echo "$long" | diag
# the plain-C modules: everything but the CH3 glue, rdma_channel.c, rdma_cvars.c, rdma_pvars.c
plain=$(ls channel/src/*.[ch] ringbuf/*.[ch] zcopy/*.[ch] |
    grep -vE 'channel/src/(ch3_[a-z]*|rdma_channel|rdma_cvars|rdma_pvars)\.c$')
other=$(grep -HnE '(typedef enum|enum) *[a-z_]*\{?[[:space:]]*$|_OK = 0' $plain |
    grep -E '_OK = 0'; grep -HnE '\b(mpi_errno|MPIR_ERR)' $plain)
[ -z "$other" ]; ok $? "one status type (rdma_status.h) in the plain-C modules, no mpi_errno"
[ -z "$other" ] || echo "$other" | diag
made=$(grep -lE 'MPIR_ERR_SET[A-Z0-9]*\(mpi_errno, MPI_ERR_OTHER, "\*\*ch3\|rdma\|(xport|init|cvar)' \
    channel/src/*.c)
[ "$made" = channel/src/rdma_channel.c ] && [ "$(grep -c 'MPIR_ERR_SET1' "$made")" -eq 4 ]
ok $? "channel statuses become mpi_errno in one function (rdma_channel.c: rdma_mpi_errno)"
[ "$made" = channel/src/rdma_channel.c ] || echo "${made:-none}" | diag
done_testing
