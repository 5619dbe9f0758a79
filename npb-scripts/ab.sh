#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# ab.sh -- two MPICH prefixes side by side in one run: npb-scripts/progs/mpi_bench
# (2 ranks; --bench mpi_rma_bench for the one-sided one) alternately under OLD
# and NEW, PAIRS times (the order flips every pair), then per test and size
# the median of the per-pair ratios NEW/OLD (time for a test with "lat" in
# its name, MB/s for the others), with their range and the median values.
# A host whose speed drifts between runs moves both halves of a pair alike.
# OLD may be any MPICH build (ch3:nemesis against ch3:rdma, say).
#
#   ab.sh --old PREFIX --new PREFIX [--pairs N] [--vm] [--out DIR] [--bench PROG]
#         [--old-env "VAR=V ..."] [--new-env "VAR=V ..."] -- ARGS...
#
# --old-env/--new-env run that side under these variables (one prefix with
# two settings: --old P --new P --old-env MPIR_CVAR_...=0).
# --vm runs every pair inside the Soft-RoCE VM with the verbs transport
# forced (one boot for the whole run); otherwise natively (shm between the
# two ranks).  Example, issue 15's 8-byte latency:
#   ab.sh --old $OLD --new $NEW --pairs 15 -- --tests latency --min 8 --max 8 --reps 11
set -euo pipefail
PROG=ab
. "$(dirname "$0")/common.sh"

# One measurement: LABEL PREFIX ROUND (under --old-env or --new-env).
run_one() {
    local bin=$OUT/$BENCH.$1 e
    [ "$1" = old ] && e=$OLD_ENV || e=$NEW_ENV
    read -ra e <<< "$e"
    env "${e[@]}" "$2/bin/mpiexec" -n 2 "$bin" "${REST[@]}" > "$OUT/$1.$3.txt" \
        || die "$BENCH under $2 failed (round $3, see $OUT/$1.$3.txt)"
}

pairs() {
    local i
    for i in $(seq "$PAIRS"); do
        if ((i % 2)); then run_one old "$OLD" "$i"; run_one new "$NEW" "$i"
        else run_one new "$NEW" "$i"; run_one old "$OLD" "$i"; fi
        log "pair $i of $PAIRS done"
    done
}

# Ratio NEW/OLD per pair, then median/min/max per (test, size).
report() {
    local i
    for i in $(seq "$PAIRS"); do
        awk -v i="$i" 'FNR == NR && !/^#/ { o[$1 " " $2] = $1 ~ /lat/ ? $3 : $4; next }
            !/^#/ && ($1 " " $2) in o { v = $1 ~ /lat/ ? $3 : $4
                print $1, $2, i, o[$1 " " $2], v, v / o[$1 " " $2] }' \
            "$OUT/old.$i.txt" "$OUT/new.$i.txt"
    done | sort -k1,1 -k2,2n -k6,6g | awk '
        function med(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        function flush() { if (!n) return
            for (i = 2; i <= n; i++) for (j = i; j > 1 && o[j-1] > o[j]; j--) { x = o[j]; o[j] = o[j-1]; o[j-1] = x }
            for (i = 2; i <= n; i++) for (j = i; j > 1 && w[j-1] > w[j]; j--) { x = w[j]; w[j] = w[j-1]; w[j-1] = x }
            printf "%-8s %10s %6d %9.3f %9.3f %9.3f %12.3f %12.3f\n", t, s, n, med(r, n), r[1], r[n], med(o, n), med(w, n)
            n = 0 }
        BEGIN { printf "%-8s %10s %6s %9s %9s %9s %12s %12s\n", "test", "size", "pairs", "new/old", "min", "max", "old", "new" }
        $1 != t || $2 != s { flush(); t = $1; s = $2 }
        { n++; r[n] = $6; o[n] = $4; w[n] = $5 }
        END { flush() }'
    echo "# new/old: median of per-pair ratios (tests named *lat*: time, lower is better; others: MB/s, higher is better)"
    echo "# old/new columns: median latency (us) or bandwidth (MB/s, 10^6 B)"
}

main() {
    local where
    OLD="" NEW="" PAIRS=11 OUT="" VM="" GUEST="" HELP="" BENCH=mpi_bench OLD_ENV="" NEW_ENV=""
    parse_options "old new pairs out bench old-env new-env" "vm guest help" "$@"
    [ -z "$HELP" ] || usage
    [[ -n $OLD && -n $NEW ]] || die "--old PREFIX and --new PREFIX are required"
    [[ $PAIRS =~ ^[1-9][0-9]*$ ]] || die "--pairs takes a positive integer (got '$PAIRS')"
    [[ -f $TOP/npb-scripts/progs/$BENCH.c ]] || die "--bench: no npb-scripts/progs/$BENCH.c"
    ((${#REST[@]})) || die "no $BENCH arguments after -- (e.g. --tests latency --min 8 --max 8)"
    if [ -n "$GUEST" ]; then pairs; return; fi
    OUT=${OUT:-$(default_out ab)}
    mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
    cp "$(bench_binary ab-old "$OLD" "$BENCH")" "$OUT/$BENCH.old"
    cp "$(bench_binary ab-new "$NEW" "$BENCH")" "$OUT/$BENCH.new"
    where="natively (shm)"
    if [ -n "$VM" ]; then
        where="in the Soft-RoCE VM (verbs)"
        log "booting the Soft-RoCE VM; $PAIRS pairs; results in $OUT"
        "$TOP/test/softroce/run-vm" --timeout $((PAIRS * 900)) --rw "$OUT" \
            --env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs -- "$0" --guest --bench "$BENCH" --old "$OLD" --new "$NEW" \
            --old-env "$OLD_ENV" --new-env "$NEW_ENV" \
            --pairs "$PAIRS" --out "$OUT" -- "${REST[@]}"
    else
        pairs
    fi
    { echo "# ab: old $OLD${OLD_ENV:+ ($OLD_ENV)}"; echo "# ab: new $NEW${NEW_ENV:+ ($NEW_ENV)}"
      echo "# ab: $PAIRS alternating pairs $where; $BENCH ${REST[*]}"; report; } | tee "$OUT/ab.txt"
}

main "$@"
