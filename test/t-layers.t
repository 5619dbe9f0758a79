#!/usr/bin/env bash
# The layering rules of docs/design.md, checked on the sources.  The layers
# are folders, top to bottom (LAYERS below); every file of a folder belongs
# to its layer, and a layer's interface is what its headers declare.
#   - calls go down only: no file calls a function declared in the headers
#     of a layer above its own (events come back through registered
#     callbacks, which are called through pointers, never by name);
#   - the CH3 glue calls only the channel core; the two transports never
#     call each other; MPICH's own files see none of the channel's headers;
#   - one status type in the plain-C layers, mpi_errno made in one place;
#   - files are split by job, not by length: a file over ~700 lines (CVAR
#     declarations not counted) is reported, not failed.
# The checks are run once more on mutants, each with an upward call planted
# in a file of another layer: every one must be caught.
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1

# layer name : folders (the first layer is the top).  rdma_status.h, the
# status type every layer returns, sits below them all.
LAYERS=(
    "glue:channel/include channel/src/ch3"
    "core:channel/src/core"
    "rendezvous:zcopy"
    "pipe:ringbuf"
    "transport:channel/src/xport channel/src/xport/shm channel/src/xport/verbs"
    "services:channel/src/thread reg"
)
BASE=channel/include/rdma_status.h

dirs_of() { echo "${LAYERS[$1]#*:}"; }
files_of() {  # files_of ROOT DIR...: the C sources and headers directly in each folder
    local root=$1 d; shift
    for d in "$@"; do ls "$root/$d"/*.[ch] 2>/dev/null; done | grep -vxF "$root/$BASE"
}
# Functions a set of headers declares or defines (top-level lines, or a
# name on the line after its return type).
api_of() {
    grep -hE '^[A-Za-z_][A-Za-z0-9_ *()]*[ *]\(?\*?[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(|^[A-Za-z_][A-Za-z0-9_]*\(' "$@" 2>/dev/null |
        grep -vE '^(typedef|#|extern|_Static_assert|struct [a-z_]+ \{|enum)' |
        sed -E 's/[[:space:]]*\(.*//; s/.*[ *]//' |
        grep -vxE 'int|void|double|char|long|unsigned|size_t|const|static|inline|__attribute__' |
        grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u
}
calls_to() {  # calls_to NAMES_FILE FILES...: lines calling one of NAMES, comments aside
    local names=$1; shift
    [ -s "$names" ] || return 0
    grep -HnE "(^|[^A-Za-z0-9_.>])($(paste -sd'|' "$names"))[[:space:]]*\(" "$@" 2>/dev/null |
        grep -vE ':[0-9]+:[[:space:]]*(\*|/\*|//)'
}

# check_tree ROOT: every rule above on the tree at ROOT; prints violations.
check_tree() {
    local root=$1 i out="" api below
    api=$(mktemp) below=$(mktemp)
    for ((i = 1; i < ${#LAYERS[@]}; i++)); do
        # the interface of every layer above i
        # shellcheck disable=SC2046
        api_of $(for ((j = 0; j < i; j++)); do files_of "$root" $(dirs_of $j); done | grep '\.h$') > "$api"
        # shellcheck disable=SC2046
        out+=$(calls_to "$api" $(files_of "$root" $(dirs_of $i)) | sed "s|^$root/|up: |")
    done
    # the glue skips no layer: it calls the core, not what lies below it
    # shellcheck disable=SC2046
    api_of $(for ((j = 2; j < ${#LAYERS[@]}; j++)); do files_of "$root" $(dirs_of $j); done |
        grep '\.h$') > "$below"
    # shellcheck disable=SC2046
    out+=$(calls_to "$below" $(files_of "$root" $(dirs_of 0)) | sed "s|^$root/|glue skips the core: |")
    # the transports never call each other
    api_of "$root"/channel/src/xport/verbs/*.h > "$api"
    out+=$(calls_to "$api" "$root"/channel/src/xport/shm/*.[ch] | sed "s|^$root/|shm calls verbs: |")
    api_of "$root"/channel/src/xport/shm/*.h > "$api"
    out+=$(calls_to "$api" "$root"/channel/src/xport/verbs/*.[ch] | sed "s|^$root/|verbs calls shm: |")
    rm -f "$api" "$below"
    [ -z "$out" ] || echo "$out"
}

plan 8
bad=$(check_tree "$TOP")
[ -z "$bad" ]; ok $? "calls go down only, layer by layer (${#LAYERS[@]} layers)"
[ -z "$bad" ] || echo "$bad" | diag

# every source file of the channel sits in a layer's folder
all=$(find channel/include channel/src ringbuf zcopy reg -name '*.[ch]' | sort)
inl=$(for ((i = 0; i < ${#LAYERS[@]}; i++)); do files_of . $(dirs_of $i); done | sed 's|^\./||' | sort)
stray=$(comm -23 <(echo "$all" | grep -vxF "$BASE") <(echo "$inl"))
[ -z "$stray" ]; ok $? "every source file belongs to a layer's folder"
[ -z "$stray" ] || echo "$stray" | diag

# Mutants: in the first .c file of each layer below the top, a call to a
# function of the layer above it; and a transport calling the other.
caught=0 planted=0 missed=""
plant() {  # plant FILE CALLEE WHAT
    local m; m=$(mktemp -d)
    cp -a channel ringbuf zcopy reg "$m"/
    printf '\nvoid layers_mutant(void)\n{\n    %s(0);\n}\n' "$2" >> "$m/$1"
    planted=$((planted + 1))
    if check_tree "$m" | grep -q "$1"; then caught=$((caught + 1)); else missed+="$3 ($1 -> $2) "; fi
    rm -rf "$m"
}
for ((i = 1; i < ${#LAYERS[@]}; i++)); do
    for d in $(dirs_of $i); do
        f=$(ls $d/*.c 2>/dev/null | head -1)
        [ -n "$f" ] || continue
        callee=$(api_of $(files_of . $(dirs_of $((i - 1))) | grep '\.h$') | head -1)
        plant "$f" "$callee" "${LAYERS[$i]%%:*} calls ${LAYERS[$((i - 1))]%%:*}"
    done
done
plant channel/src/ch3/rdma_channel.c rb_pipe_peek "glue calls the pipe"
plant channel/src/xport/shm/rdma_xport_shm.c rdma_verbs_drain "shm calls verbs"
[ "$caught" -eq "$planted" ] && [ "$planted" -ge 8 ]
ok $? "every planted upward call is caught ($caught of $planted mutants)"
[ -z "$missed" ] || echo "missed: $missed" | diag

# MPICH's translation units include mpidi_ch3_pre.h (every one) and
# mpidi_ch3_impl.h (CH3's RMA, port and spawn code): no channel header
leak=$(grep -Hn '#include' channel/include/mpidi_ch3_pre.h channel/include/mpidi_ch3_impl.h \
    channel/include/mpidi_ch3_post.h | grep -vE '<[a-z/]+\.h>|"mpidimpl\.h"')
[ -z "$leak" ]; ok $? "MPICH's own files see none of the channel's headers (the VC's link is opaque)"
[ -z "$leak" ] || echo "$leak" | diag

# files by job: a note above ~700 lines, CVAR declarations not counted
long=$(for f in $all; do
    n=$(sed '/BEGIN_MPI_T_CVAR_INFO_BLOCK/,/END_MPI_T_CVAR_INFO_BLOCK/d' "$f" | wc -l)
    [ "$n" -le 700 ] || echo "$f: $n lines (is it one job?)"
done)
ok 0 "files over ~700 lines are listed for review ($(echo -n "$long" | grep -c .) now)"
[ -z "$long" ] || echo "$long" | diag

# the plain-C layers: everything but the glue
plain=$(for ((i = 1; i < ${#LAYERS[@]}; i++)); do files_of . $(dirs_of $i); done)
other=$(grep -HnE '_OK = 0' $plain; grep -HnE '\b(mpi_errno|MPIR_ERR)' $plain)
[ -z "$other" ]; ok $? "one status type (rdma_status.h) in the plain-C layers, no mpi_errno"
[ -z "$other" ] || echo "$other" | diag
ints=$(grep -HnE '^(static )?int [a-z_]+\(' $plain | grep -E 'zc\.c|rb_[a-z]+\.c' |
    grep -vE '\b(zc_iov_view|zc_candidate|rb_tx_window_retire|rb_rx_verified)\(')  # counts, yes/no
[ -z "$ints" ]; ok $? "the pipe's and the rendezvous' statuses are typed rdma_status_t"
[ -z "$ints" ] || echo "$ints" | diag

made=$(grep -lE 'MPIR_ERR_SET[A-Z0-9]*\(mpi_errno, MPI[X]?_ERR_[A-Z_]*, "\*\*ch3\|rdma\|(xport|init|cvar)' \
    channel/src/ch3/*.c)
[ "$made" = channel/src/ch3/rdma_channel.c ] && [ "$(grep -c 'MPIR_ERR_SET1' "$made")" -eq 4 ]
ok $? "channel statuses become mpi_errno in one function (rdma_channel.c: rdma_mpi_errno)"
[ "$made" = channel/src/ch3/rdma_channel.c ] || echo "${made:-none}" | diag
done_testing
