#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# mem-table.sh -- the memory a job's ranks use, natively on one node (issue 19):
# NP ranks do ITERS all-to-alls of BYTES per peer (npb-scripts/progs/mpi_mem.c), then
# the proportional set sizes of all ranks are summed (Pss counts a page shared
# by k processes 1/k to each: the sum is the job's memory).  Prints a markdown
# table per build and rank count with the ratio to ch3:nemesis, then the
# projection to --project ranks per node from a fit Pss(N) = a N + b N^2 over
# the measured counts, and ch3:rdma's verbs ring memory per process at
# --peers remote peers (pinned: 2 x RING_INIT_SIZE + a page per peer that
# only carried small messages, up to 2 x RING_SIZE + a page per peer whose
# traffic grew its rings).
#
# With --verbs "2 4 8 16" it measures verbs instead (issue 68): each build of
# --builds (default rdma; BUILD-variant:VAR=VAL adds settings) runs that many
# ranks in the Soft-RoCE VM with the verbs transport forced, and the table gives
# per process the connections ready at the end (rdma_conns_live), the driver
# memory (its mappings of the verbs device: queue pairs, CQs, the shared
# receive queue) and the rings, then the slope per peer (least squares over
# the counts); "rdma-cap4:MPIR_CVAR_CH3_RDMA_MAX_CONNS=4" shows the cap.
#
#   mem-table.sh [--builds "rdma nemesis sock"] [--np "8 32 64"] [--iters 300]
#                [--bytes 4096] [--project 128] [--peers 1000] [--out DIR] [--wait-builds]
#   mem-table.sh --verbs "2 4 8 16" [--builds "rdma rdma-rq:MPIR_CVAR_CH3_RDMA_SRQ_SIZE=0"]
#                [--iters 20] [--bytes 4096] [--out DIR]
set -euo pipefail
PROG=mem-table
. "$(dirname "$0")/common.sh"

# One run: LABEL NP [verbs] -> "mem NP PSS_SUM PSS_MAX RSS_MAX RING_MAX DEVQ_MAX" in
# OUT/LABEL.NP.txt, or with verbs, in the Soft-RoCE VM, verbs forced, in OUT/LABEL.verbs.NP.txt.
measure() {
    local label=$1 np=$2 base envs p bin run=() tag=""
    base=$(spec_build "$label") envs=$(spec_env "$label")
    p=$(prefix_of "$base" ${WAIT_BUILDS:+wait})
    bin=$(bench_binary "$base" "$p" mpi_mem)
    [ -z "${3-}" ] || run=("$TOP/test/softroce/run-vm" --timeout 1500 -- env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs) tag=.verbs
    log "$label${3:+ over verbs in the VM}, $np ranks"
    # shellcheck disable=SC2086  # envs: VAR=VAL words
    "${run[@]}" env $envs timeout 1800 "$p/bin/mpiexec" -n "$np" "$bin" "$ITERS" "$BYTES" \
        > "$OUT/$(spec_label "$label")$tag.$np.txt" 2>&1 || log "$label with $np ranks failed (see $OUT)"
}

# Column COL (6 rings, 7 driver memory: KiB; 8 connections ready; the largest rank's) of
# LABEL's verbs run at NP.
verbs_kib() { awk -v c="$3" '$1 == "mem" { print $c }' "$OUT/$1.verbs.$2.txt" 2>/dev/null; }

verbs_table() {
    local np label l
    printf '| ranks | peers |'
    for label in $BUILDS; do
        l=$(spec_label "$label"); printf ' %s live | %s driver KiB | %s rings KiB |' "$l" "$l" "$l"
    done; echo
    printf '|---|---|'; for label in $BUILDS; do printf -- '---|---|---|'; done; echo
    for np in $VERBS; do
        printf '| %s | %s |' "$np" $((np - 1))
        for label in $BUILDS; do
            l=$(spec_label "$label")
            printf ' %s | %s | %s |' "$(verbs_kib "$l" "$np" 8)" "$(verbs_kib "$l" "$np" 7)" \
                "$(verbs_kib "$l" "$np" 6)"
        done
        echo
    done
    echo
    for label in $BUILDS; do
        l=$(spec_label "$label")
        for np in $VERBS; do echo "$((np - 1)) $(verbs_kib "$l" "$np" 7)"; done |
            awk -v l="$l" -v e="$(spec_env "$label")" 'NF == 2 { n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
                END { if (e != "") l = l " (" e ")"; d = n * sxx - sx * sx
                    if (n < 2 || d == 0) { print "- " l ": too few points"; exit }
                    b = (n * sxy - sx * sy) / d
                    printf "- %s: driver memory %.1f KiB per peer + %.0f KiB (least squares)\n", l, b, (sy - b * sx) / n }'
    done
}

verbs_main() {
    local np label
    for np in $VERBS; do for label in $BUILDS; do measure "$label" "$np" verbs; done; done
    {
        echo "Verbs memory per process after $ITERS all-to-alls of $BYTES B per peer, in the Soft-RoCE VM"
        echo "(rxe; npb-scripts/progs/mpi_mem.c, largest rank; runs in $OUT):"
        echo
        verbs_table
    } | tee "$OUT/report-verbs.md"
}

# Pss sum in MiB of LABEL at NP ("" if the run failed).
pss_mib() { awk '$1 == "mem" { printf "%.0f", $3 / 1024 }' "$OUT/$1.$2.txt" 2>/dev/null; }

table() {
    local np label v n
    printf '| ranks |'; for label in $BUILDS; do printf ' %s Pss MiB |' "$label"; done
    for label in $BUILDS; do [ "$label" = nemesis ] || printf ' %s / nemesis |' "$label"; done; echo
    printf '|---|'; for label in $BUILDS $BUILDS; do printf -- '---|'; done | sed 's/---|$//'; echo
    for np in $NP; do
        printf '| %s |' "$np"
        for label in $BUILDS; do v=$(pss_mib "$label" "$np"); printf ' %s |' "${v:-failed}"; done
        n=$(pss_mib nemesis "$np")
        for label in $BUILDS; do
            [ "$label" = nemesis ] && continue
            v=$(pss_mib "$label" "$np")
            awk -v v="$v" -v n="$n" 'BEGIN { printf (v != "" && n > 0) ? " %.2f |" : " - |", v / n }'
        done
        echo
    done
}

# Least squares Pss(N) = a N + b N^2 over the measured counts, evaluated at PROJECT.
projection() {
    local label np
    for label in $BUILDS; do
        for np in $NP; do echo "$np $(pss_mib "$label" "$np")"; done |
            awk -v l="$label" -v N="$PROJECT" 'NF == 2 && $2 != "" {
                n = $1; y = $2; s11 += n * n; s12 += n * n * n; s22 += n * n * n * n
                t1 += n * y; t2 += n * n * y; k++ }
                END { d = s11 * s22 - s12 * s12; if (k < 2 || d == 0) { print "- " l ": too few points"; exit }
                    a = (t1 * s22 - t2 * s12) / d; b = (s11 * t2 - s12 * t1) / d
                    printf "- %s: Pss(N) = %.2f N + %.4f N^2 MiB; at %d ranks %.0f MiB\n", l, a, b, N, a * N + b * N * N }'
    done
}

# The default of MPIR_CVAR_CH3_RDMA_<NAME> in the ch3:rdma build (mpivars).
cvar_default() {
    "$(prefix_of rdma)/bin/mpivars" 2>/dev/null |
        sed -n "s/.*MPIR_CVAR_CH3_RDMA_$1 *=\(-*[0-9]*\).*/\1/p" | head -1
}

main() {
    BUILDS="" NP="8 32 64" ITERS="" BYTES=4096 PROJECT=128 PEERS=1000 OUT="" WAIT_BUILDS="" HELP="" VERBS=""
    parse_options "builds np iters bytes project peers out verbs" "wait-builds help" "$@"
    [ -z "$HELP" ] || usage
    OUT=${OUT:-$(default_out mem)}
    mkdir -p "$OUT"
    if [ -n "$VERBS" ]; then
        BUILDS=${BUILDS:-rdma} ITERS=${ITERS:-20}
        verbs_main
        return
    fi
    BUILDS=${BUILDS:-rdma nemesis sock} ITERS=${ITERS:-300}
    local np label ring init
    for np in $NP; do for label in $BUILDS; do measure "$label" "$np"; done; done
    ring=$(cvar_default RING_SIZE) init=$(cvar_default RING_INIT_SIZE)
    [ "${init:--1}" != -1 ] || init=16384
    {
        echo "Memory after $ITERS all-to-alls of $BYTES B per peer, one node ($(nproc) cores; $(uname -r)):"
        echo "sum of the ranks' Pss (npb-scripts/progs/mpi_mem.c; runs in $OUT)."
        echo
        table
        echo
        echo "Projection to $PROJECT ranks on a node (fit over $NP ranks):"
        projection
        awk -v r="${ring:-524288}" -v i="$init" -v p="$PEERS" 'BEGIN {
            printf "- ch3:rdma over verbs: %d peers x (2 x RING_INIT_SIZE %d KiB + 4 KiB) = %.0f MiB pinned per process while they carry small messages;\n",
                p, i / 1024, p * (2 * i + 4096) / 1048576
            printf "  a peer whose traffic fills its ring grows it, up to 2 x RING_SIZE %d KiB + 4 KiB (%.0f MiB if all %d did)\n",
                r / 1024, p * (2 * r + 4096) / 1048576, p }'
    } | tee "$OUT/report.md"
}

main "$@"
