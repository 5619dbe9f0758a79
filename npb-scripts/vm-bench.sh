#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# vm-bench.sh -- ch3:rdma over verbs inside the Soft-RoCE VM next to the raw
# device, in the same boot: perftest ib_write_lat, ib_write_bw and
# ib_read_bw, then npb-scripts/progs/mpi_bench (2 ranks, verbs forced) for each
# large-message path: eager (one frame per message, up to ring/2), fixed
# (16 KiB frames), super (superpipeline), zcopy (RDMA-read rendezvous),
# ping-pong and windowed, and super/zcopy again with first-touch buffers.
# Prints bandwidth per size and the ratios to the raw device (MB = 10^6 B;
# perftest's MB = 2^20 B are converted).
#
#   vm-bench.sh [--out DIR] [--sizes "65536 1048576 4194304"] [--reps R]
#
# The VM is emulated (TCG): compare ratios from one run, never absolute
# figures across runs.
set -euo pipefail
PROG=vm-bench
. "$(dirname "$0")/common.sh"
C="MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy"
MODES=("eager:$C MPIR_CVAR_CH3_RDMA_PIPELINE=fixed MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=262144"
    "fixed:$C MPIR_CVAR_CH3_RDMA_PIPELINE=fixed" "super:$C MPIR_CVAR_CH3_RDMA_PIPELINE=super"
    "zcopy:MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy")

# Inside the VM: every measurement into its own file under OUT.
guest() {
    local bin=$1 p=$2 s m ft lo hi
    lo=$(tr ' ' '\n' <<< "$SIZES" | sort -n | head -1) hi=$(tr ' ' '\n' <<< "$SIZES" | sort -n | tail -1)
    perftest ib_write_lat 8 2000 "$OUT/ib_write_lat.txt"
    for s in $SIZES; do
        perftest ib_write_bw "$s" 200 "$OUT/ib_write_bw.$s.txt"
        perftest ib_read_bw "$s" 200 "$OUT/ib_read_bw.$s.txt"
    done
    for m in "${MODES[@]}"; do
        for ft in "" --first-touch; do
            [[ -z $ft || ${m%%:*} == super || ${m%%:*} == zcopy ]] || continue
            log "mpi_bench, ${m%%:*} $ft"
            # shellcheck disable=SC2086
            env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs ${m#*:} \
                "$p/bin/mpiexec" -n 2 "$bin" --tests latency,bw --min "$lo" --max "$hi" \
                --reps "$REPS" $ft > "$OUT/${m%%:*}${ft:+-first}.1.txt"
        done
    done
    env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs "$p/bin/mpiexec" -n 2 "$bin" --tests latency \
        --min 8 --max 8 --reps "$REPS" > "$OUT/latency.1.txt"
    # ib_write_lat polls memory, i.e. assumes in-order placement, which rxe
    # does not report: the like-for-like figure uses the channel's override
    env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER=1 \
        "$p/bin/mpiexec" -n 2 "$bin" --tests latency --min 8 --max 8 --reps "$REPS" \
        > "$OUT/latency-inorder.1.txt"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print (a != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }'; }
max() { awk -v a="${1:-0}" -v b="$2" 'BEGIN { print (a + 0 > b + 0 ? a : b) }'; }

report() {
    local s w r m raw_lat raw_typ lat v
    # mpi_bench times a loop (a mean per message): compare with perftest's
    # t_avg; its t_typical (median) hides the emulator's scheduling stalls
    raw_typ=$(awk '$1 == 8 { print $5 }' "$OUT/ib_write_lat.txt")
    raw_lat=$(awk '$1 == 8 { print $6 }' "$OUT/ib_write_lat.txt")
    lat=$(value latency latency 8 3) v=$(value latency-inorder latency 8 3 2> /dev/null)
    echo "8-byte latency: ib_write_lat t_avg $raw_lat us (t_typical $raw_typ us), ch3:rdma $lat us ($(ratio "$lat" "$raw_lat")x t_avg; default arrival mode: verified on rxe)"
    [ -z "$v" ] || echo "8-byte latency, in-order placement assumed as ib_write_lat does: ch3:rdma $v us ($(ratio "$v" "$raw_lat")x t_avg)"
    echo "bandwidth, MB/s (ratio to ib_write_bw); bw = windowed, pp = ping-pong, 1st = first touch"
    printf '%9s %9s %9s' size raw_write raw_read
    for m in eager fixed super zcopy super-first zcopy-first; do printf ' %16s' "$m(bw)"; done
    printf ' %16s %16s\n' "super(pp)" "zcopy(pp)"
    for s in $SIZES; do
        w=$(perftest_mb "$OUT/ib_write_bw.$s.txt" "$s") r=$(perftest_mb "$OUT/ib_read_bw.$s.txt" "$s")
        printf '%9s %9s %9s' "$s" "$w" "$r"
        for m in eager:bw fixed:bw super:bw zcopy:bw super-first:bw zcopy-first:bw super:latency \
            zcopy:latency; do
            v=$(value "${m%%:*}" "${m#*:}" "$s" 4)
            printf ' %16s' "${v:--} ($(ratio "$v" "$w"))"
        done
        echo
    done
    targets
}

# Issue 5's targets: best ch3:rdma bandwidth against the best ib_write_bw;
# the better first-touch path at 1 MiB against ib_write_bw at 1 MiB.
targets() {
    local s m v w best=0 raw=0 first=0
    for s in $SIZES; do
        w=$(perftest_mb "$OUT/ib_write_bw.$s.txt" "$s")
        raw=$(max "$w" "$raw")
        for m in eager fixed super zcopy super-first zcopy-first; do
            v=$(value "$m" bw "$s" 4)
            best=$(max "$v" "$best")
            [[ $s != 1048576 || $m != *-first ]] || first=$(max "$v" "$first")
        done
    done
    echo "peak: ch3:rdma $best MB/s, ib_write_bw $raw MB/s ($(ratio "$best" "$raw"); target 0.95)"
    w=$(perftest_mb "$OUT/ib_write_bw.1048576.txt" 1048576)
    [ -z "$w" ] || echo "first touch, 1 MiB: ch3:rdma $first MB/s, ib_write_bw $w MB/s ($(ratio "$first" "$w"); target 0.80)"
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
