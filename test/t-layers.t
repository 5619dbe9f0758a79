#!/usr/bin/env bash
# The layering rules of channel/README.md, checked on the sources: calls go
# down only, and every file does one job (at most ~600 lines).
. "$(dirname "$0")/lib.sh"
plan 4
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
back=$(calls 'zc_' ringbuf/*.[ch]; grep -Hn 'zc\.h\|rdma_' ringbuf/*.[ch] | grep '#include')
[ -z "$back" ]; ok $? "the pipe knows nothing of the rendezvous or the transports"
[ -z "$back" ] || echo "$back" | diag
long=$(wc -l channel/src/*.[ch] channel/include/*.h ringbuf/*.[ch] zcopy/*.[ch] |
    awk '$2 != "total" && $1 > 600 { print $2 ": " $1 " lines" }')
[ -z "$long" ]; ok $? "no source file over 600 lines"
[ -z "$long" ] || echo "$long" | diag
done_testing
