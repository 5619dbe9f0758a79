#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench.sh -- run npb-scripts/progs/mpi_bench with 2 ranks for several builds and
# compare them side by side (latency at 8 B, bandwidth at 1 MiB and 16 MiB,
# ratios to ch3:nemesis), each number with the exact command behind it.
#
#   bench.sh [--builds "nemesis sock rdma rdma-basic:VAR=VAL"] [--rounds N]
#            [--out DIR] [--wait-builds] [-- MPI_BENCH_ARGS...]
#
# Build specs as in main-job.sh: LABEL[:VAR=VAL...], LABEL a build (rdma,
# sock, nemesis, debian-mpich, debian-openmpi) or BUILD-variant.  --rounds
# runs every build N times, round by round (other load on the machine then
# hits all builds alike), and compares the medians over the rounds.  The
# full mpi_bench tables are kept in DIR/<label>.<round>.txt.
set -euo pipefail
PROG=bench
. "$(dirname "$0")/common.sh"


# Side-by-side table from DIR/runs.tsv (label, status, libmpi, command) and
# the tables; "-" marks a size that was not measured.
compare() {
    local label status lib cmd fmt='%-16s %10s %7s %12s %7s %12s %7s  %s\n'
    # shellcheck disable=SC2059
    printf "$fmt" build lat8B_us x_nem bw1MiB_MBps x_nem bw16MiB_MBps x_nem command
    while IFS=$'\t' read -r label status _ cmd; do
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$status" "$(value "$label" latency 8 3)" \
            "$(value "$label" bw 1048576 4)" "$(value "$label" bw 16777216 4)" "$cmd"
    done < "$OUT/runs.tsv" |
    awk -F'\t' -v fmt="$fmt" '
        function ratio(v, r) { return (v != "" && r + 0 > 0) ? sprintf("%.2f", v / r) : "-" }
        function cell(v) { return v != "" ? v : status != "ok" ? "FAIL" : "-" }
        { row[NR] = $0; if ($1 == "nemesis" && $2 == "ok") { rl = $3; rb1 = $4; rb16 = $5 } }
        END { for (i = 1; i <= NR; i++) { split(row[i], f, "\t"); status = f[2]
            printf fmt, f[1], cell(f[3]), ratio(f[3], rl), cell(f[4]), ratio(f[4], rb1),
                cell(f[5]), ratio(f[5], rb16), f[6] (status == "ok" ? "" : "  [" status "]") } }'
    while IFS=$'\t' read -r label status lib cmd; do echo "# $label: libmpi $lib"; done < "$OUT/runs.tsv"
}

main() {
    local spec label base p bin cmd envs status round
    BUILDS=$PROJECT_BUILDS ROUNDS=1 OUT="" WAIT_BUILDS="" HELP=""
    parse_options "builds rounds out" "wait-builds help" "$@"
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
        printf '%s\tok\t%s\t%s\n' "$label" "$(lib_id "$p")" "${envs:+env $envs }$p/bin/mpiexec -n 2 $bin${*:+ $*}" \
            >> "$OUT/runs.tsv"
    done
    for round in $(seq "$ROUNDS"); do
        while IFS=$'\t' read -r label status _ cmd; do
            log "round $round/$ROUNDS, $label: $cmd"
            # shellcheck disable=SC2086  # the command line, as printed
            timeout -k 10 1800 $cmd < /dev/null > "$OUT/$label.$round.txt" 2> "$OUT/$label.$round.err" ||
                { status=exit$?; log "$label: mpi_bench failed ($status; see $OUT/$label.$round.err)"
                  sed -i "s|^$label\tok\t|$label\t$status\t|" "$OUT/runs.tsv"; }
        done < <(cat "$OUT/runs.tsv")
    done
    compare | tee "$OUT/compare.txt"
    log "lat: ratio < 1 is faster; bw: ratio > 1 is faster.  Tables: $OUT/<label>.<round>.txt, summary: $OUT/compare.txt"
}

main "$@"
