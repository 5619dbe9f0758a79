#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# vm-bench.sh -- ch3:rdma over verbs inside the Soft-RoCE VM next to the raw
# device, in the same boot: perftest ib_write_lat, ib_write_bw and
# ib_read_bw, then test/bench/mpi_bench (2 ranks, verbs forced) for each
# large-message protocol, with reused and with first-touch buffers.  Prints
# latency and bandwidth per size and the ratios to the raw device (MB =
# 10^6 B; perftest's MB = 2^20 B are converted).
#
#   vm-bench.sh [--out DIR] [--sizes "65536 1048576 4194304"] [--reps R]
#
# The VM is emulated (TCG): compare ratios from one run, never absolute
# figures across runs.
set -euo pipefail
PROG=vm-bench
. "$(dirname "$0")/common.sh"
MODES="copy zcopy"

# perftest PROG SIZE FILE: one run of PROG against itself on rxe0.
perftest() {
    "$1" -d rxe0 -x 1 -s "$2" -n "$3" > /dev/null 2>&1 &
    sleep 1
    "$1" -d rxe0 -x 1 -s "$2" -n "$3" 127.0.0.1 > "$4" 2>&1 || log "$1 -s $2 failed (see $4)"
    wait
}

# Inside the VM: every measurement into its own file under OUT.
guest() {
    local bin=$1 p=$2 s m ft lo hi
    lo=$(tr ' ' '\n' <<< "$SIZES" | sort -n | head -1) hi=$(tr ' ' '\n' <<< "$SIZES" | sort -n | tail -1)
    perftest ib_write_lat 8 2000 "$OUT/ib_write_lat.txt"
    for s in $SIZES; do
        perftest ib_write_bw "$s" 200 "$OUT/ib_write_bw.$s.txt"
        perftest ib_read_bw "$s" 200 "$OUT/ib_read_bw.$s.txt"
    done
    for m in $MODES; do
        for ft in "" --first-touch; do
            log "mpi_bench, LARGE_PROTOCOL=$m $ft"
            env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL="$m" \
                "$p/bin/mpiexec" -n 2 "$bin" --tests bw --min "$lo" --max "$hi" --reps "$REPS" \
                $ft > "$OUT/$m${ft:+-first}.1.txt"
        done
    done
    env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs "$p/bin/mpiexec" -n 2 "$bin" --tests latency \
        --min 8 --max 8 --reps "$REPS" > "$OUT/latency.1.txt"
}

# perftest_mb PROG SIZE: average bandwidth in 10^6 B/s.
perftest_mb() {
    awk -v s="$2" '$1 == s { printf "%.1f", $4 * 1.048576 }' "$OUT/$1.$2.txt"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print (a != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }'; }

report() {
    local s w r raw_lat lat fmt='%10s %9s %9s %9s %9s %9s %9s %8s %8s %8s\n'
    raw_lat=$(awk '$1 == 8 { print $5 }' "$OUT/ib_write_lat.txt")
    lat=$(value latency latency 8 3)
    echo "8-byte latency: ib_write_lat typical $raw_lat us, ch3:rdma $lat us ($(ratio "$lat" "$raw_lat")x)"
    # shellcheck disable=SC2059
    printf "$fmt" size raw_write raw_read copy copy_1st zcopy zcopy_1st zc/write zc/read 1st/write
    for s in $SIZES; do
        w=$(perftest_mb ib_write_bw "$s") r=$(perftest_mb ib_read_bw "$s")
        # shellcheck disable=SC2059
        printf "$fmt" "$s" "$w" "$r" "$(value copy bw "$s" 4)" "$(value copy-first bw "$s" 4)" \
            "$(value zcopy bw "$s" 4)" "$(value zcopy-first bw "$s" 4)" \
            "$(ratio "$(value zcopy bw "$s" 4)" "$w")" "$(ratio "$(value zcopy bw "$s" 4)" "$r")" \
            "$(ratio "$(value zcopy-first bw "$s" 4)" "$w")"
    done
}

main() {
    local p bin
    SIZES="65536 262144 1048576 4194304" REPS=3 OUT="" HELP="" GUEST=""
    parse_options "out sizes reps guest" "help" "$@"
    [ -z "$HELP" ] || usage
    if [ -n "$GUEST" ]; then
        IFS=, read -r bin p <<< "$GUEST"
        guest "$bin" "$p"
        return
    fi
    OUT=${OUT:-$(default_out vm-bench)}
    mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
    p=$(prefix_of rdma)
    bin=$(bench_binary rdma "$p")
    log "booting the Soft-RoCE VM; results in $OUT"
    "$TOP/test/softroce/run-vm" --timeout 5400 --rw "$OUT" -- "$0" --guest "$bin,$p" \
        --out "$OUT" --sizes "$SIZES" --reps "$REPS"
    report | tee "$OUT/compare.txt"
    log "bandwidth in MB/s (10^6 B); _1st: first-touch buffers.  Tables: $OUT/*.txt"
}

main "$@"
