#!/usr/bin/env bash
# bench.sh -- run test/bench/mpi_bench with 2 ranks for several builds and
# compare them side by side (latency at 8 B, bandwidth at 1 MiB and 16 MiB,
# ratios to ch3:nemesis), each number with the exact command behind it.
#
#   bench.sh [--builds "nemesis sock rdma rdma-basic:VAR=VAL"] [--out DIR]
#            [--wait-builds] [-- MPI_BENCH_ARGS...]
#
# Build specs as in main-job.sh: LABEL[:VAR=VAL...], LABEL a build (rdma,
# sock, nemesis, debian-mpich, debian-openmpi) or BUILD-variant.  The full
# mpi_bench tables are kept in DIR/<label>.txt.
set -euo pipefail
PROG=bench
. "$(dirname "$0")/common.sh"
SRC=$TOP/test/bench/mpi_bench.c

usage() { sed -n '6,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# mpi_bench for prefix $2, rebuilt when the source or the MPI changes.
bench_binary() {
    local dir=$CACHE/bench/$1 id
    id=$(mpi_identity "$2"; sha256sum < "$SRC")
    if [ "$(cat "$dir/.identity" 2>/dev/null)" != "$id" ] || [ ! -x "$dir/mpi_bench" ]; then
        mkdir -p "$dir"
        log "compiling mpi_bench for $1"
        "$2/bin/mpicc" -O2 -Wall -o "$dir/mpi_bench" "$SRC" || die "compiling $SRC with $2/bin/mpicc failed"
        echo "$id" > "$dir/.identity"
    fi
    echo "$dir/mpi_bench"
}

# value TABLE TEST SIZE COLUMN: one figure of an mpi_bench table.
value() { awk -v t="$2" -v n="$3" -v c="$4" '$1 == t && $2 == n { print $c; exit }' "$1"; }

# Side-by-side table from DIR/runs.tsv (label, status, command) and
# DIR/<label>.txt; "-" marks a size that was not measured.
compare() {
    local out=$1 label status cmd fmt='%-16s %10s %7s %12s %7s %12s %7s  %s\n'
    # shellcheck disable=SC2059
    printf "$fmt" build lat8B_us x_nem bw1MiB_MBps x_nem bw16MiB_MBps x_nem command
    while IFS=$'\t' read -r label status cmd; do
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$status" "$(value "$out/$label.txt" latency 8 3)" \
            "$(value "$out/$label.txt" bw 1048576 4)" "$(value "$out/$label.txt" bw 16777216 4)" "$cmd"
    done < "$out/runs.tsv" |
    awk -F'\t' -v fmt="$fmt" '
        function ratio(v, r) { return (v != "" && r + 0 > 0) ? sprintf("%.2f", v / r) : "-" }
        function cell(v) { return v != "" ? v : status != "ok" ? "FAIL" : "-" }
        { row[NR] = $0; if ($1 == "nemesis" && $2 == "ok") { rl = $3; rb1 = $4; rb16 = $5 } }
        END { for (i = 1; i <= NR; i++) { split(row[i], f, "\t"); status = f[2]
            printf fmt, f[1], cell(f[3]), ratio(f[3], rl), cell(f[4]), ratio(f[4], rb1),
                cell(f[5]), ratio(f[5], rb16), f[6] (status == "ok" ? "" : "  [" status "]") } }'
}

main() {
    local spec label base p bin cmd envs status
    BUILDS=$PROJECT_BUILDS OUT="" WAIT_BUILDS="" HELP=""
    parse_options "builds out" "wait-builds help" "$@"
    [ -z "$HELP" ] || usage
    set -- ${REST[@]+"${REST[@]}"}
    for spec in $BUILDS; do spec_build "$spec" > /dev/null; done
    OUT=${OUT:-$(default_out bench)}
    mkdir -p "$OUT"
    : > "$OUT/runs.tsv"
    for spec in $BUILDS; do
        label=$(spec_label "$spec") base=$(spec_build "$spec") envs=$(spec_env "$spec")
        p=$(prefix_of "$base" ${WAIT_BUILDS:+wait})
        bin=$(bench_binary "$base" "$p")
        cmd="${envs:+env $envs }$p/bin/mpiexec -n 2 $bin${*:+ $*}"
        log "running $label: $cmd"
        status=ok
        # shellcheck disable=SC2086
        timeout -k 10 1800 env $envs "$p/bin/mpiexec" -n 2 "$bin" "$@" > "$OUT/$label.txt" 2> "$OUT/$label.err" ||
            { status=exit$?; log "$label: mpi_bench failed ($status; see $OUT/$label.err)"; }
        printf '%s\t%s\t%s\n' "$label" "$status" "$cmd" >> "$OUT/runs.tsv"
    done
    compare "$OUT" | tee "$OUT/compare.txt"
    log "lat: ratio < 1 is faster; bw: ratio > 1 is faster.  Tables: $OUT/<label>.txt, summary: $OUT/compare.txt"
}

main "$@"
