#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# vm-rma.sh -- one-sided operations over verbs in the Soft-RoCE VM, in one
# boot: ch3:rdma's mpi_rma_bench (2 ranks, verbs forced, MPI_Win_allocate,
# lock_all + MPI_Win_flush after each operation; "direct": puts and gets as
# RDMA writes and reads, "am": MPIR_CVAR_CH3_RDMA_RMA_DIRECT=0, active
# messages) next to perftest (ib_write_lat, ib_read_lat, ib_write_bw,
# ib_read_bw, ib_atomic_lat) and, with --peers, Open MPI over UCX (pml and
# osc ucx, the settings of test/softroce/peers.md).  Every pair runs all of them, the
# order flipped every pair; the report gives per figure the median of the
# per-pair ratios and their range.
#   put latency against twice ib_write_lat's t_avg (perftest reports half a
#   round trip for writes; a flushed put needs the whole one), get latency
#   against ib_read_lat's (a full round trip), bandwidth at the largest
#   size against ib_write_bw / ib_read_bw (MB = 10^6 B); MPI_Fetch_and_op
#   and MPI_Compare_and_swap on one int64 against ib_atomic_lat's
#   FETCH_AND_ADD and CMP_AND_SWAP (a full round trip; ch3:rdma sends them
#   as active messages, the target's CPU doing the operation), and
#   accumulates (MPI_SUM of ints, always active messages) against the
#   other modes only.
# --flavor picks the window (mpi_rma_bench's flavours: allocate, the
# default, create, dynamic, or coll: dynamic with info coll_attach=true).
# --modes may add "nobounce": direct with MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX=0
# (every local buffer through the registration cache), and "nic": direct
# with windows created with the hints that let the NIC do accumulates
# (mpi_rma_bench --nic-hints 1: which_accumulate_ops=sum,no_op,cswap and
# disable_shm_accumulate=true; fetch-and-op and compare-and-swap become
# NIC atomics); --bw-size 0 leaves out bandwidth.
#
#   vm-rma.sh [--out DIR] [--lat-sizes "8 4096"] [--bw-size 4194304] [--reps R]
#             [--pairs N] [--peers] [--modes "direct am nic"] [--flavor allocate]
#
# The VM is emulated (TCG): only ratios from one boot mean anything.
set -euo pipefail
PROG=vm-rma
. "$(dirname "$0")/common.sh"
UCX_RXE=("UCX_TLS=rc,self" UCX_NET_DEVICES=rxe0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n)

# rma_bench FILE CMD...: mpi_rma_bench's latency and bandwidth lines into FILE.
rma_bench() {
    local f=$1 s; shift
    : > "$f"
    for s in $LAT_SIZES; do
        "$@" --ops put,get,acc --flavors "$FLAVOR" --syncs flush --tests lat --min "$s" \
            --max "$s" --reps "$REPS" >> "$f"
    done
    "$@" --ops fop,cas --flavors "$FLAVOR" --syncs flush --tests lat --min 8 --max 8 \
        --reps "$REPS" >> "$f"
    [ "$BW_SIZE" = 0 ] || "$@" --ops put,get --flavors "$FLAVOR" --syncs flush --tests bw \
        --min "$BW_SIZE" --max "$BW_SIZE" --reps "$REPS" >> "$f"
}

# Inside the VM: pair k's measurements into OUT/<what>.k.txt.
guest() {
    local p=$1 k s m order
    for ((k = 1; k <= PAIRS; k++)); do
        for s in $LAT_SIZES; do
            perftest ib_write_lat "$s" 1000 "$OUT/ib_write_lat.$s.$k.txt"
            perftest ib_read_lat "$s" 1000 "$OUT/ib_read_lat.$s.$k.txt"
        done
        perftest ib_atomic_lat 8 1000 "$OUT/ib_atomic_fop.8.$k.txt" -A FETCH_AND_ADD
        perftest ib_atomic_lat 8 1000 "$OUT/ib_atomic_cas.8.$k.txt" -A CMP_AND_SWAP
        if [ "$BW_SIZE" != 0 ]; then
            perftest ib_write_bw "$BW_SIZE" 200 "$OUT/ib_write_bw.$k.txt"
            perftest ib_read_bw "$BW_SIZE" 200 "$OUT/ib_read_bw.$k.txt"
        fi
        order="$MODES${PEERS:+ ompi}"
        ((k % 2)) || order=$(tr ' ' '\n' <<< "$order" | tac | tr '\n' ' ')
        for m in $order; do
            log "pair $k: $m"
            case $m in
                direct | am | nobounce | nic) rma_bench "$OUT/$m.$k.txt" env \
                    MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs \
                    MPIR_CVAR_CH3_RDMA_RMA_DIRECT="$([ "$m" = am ] && echo 0 || echo 1)" \
                    MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX="$([ "$m" = nobounce ] && echo 0 || echo 8192)" \
                    "$p/bin/mpiexec" -n 2 "$OUT/mpi_rma_bench.rdma" \
                    --nic-hints "$([ "$m" = nic ] && echo 1 || echo 0)" ;;
                ompi) rma_bench "$OUT/ompi.$k.txt" env "${UCX_RXE[@]}" \
                    OMPI_MCA_orte_tmpdir_base=/dev/shm OMPI_MCA_pml=ucx OMPI_MCA_osc=ucx \
                    OMPI_MCA_btl=self "$OMPI/bin/mpiexec" -x UCX_TLS -x UCX_NET_DEVICES \
                    -x UCX_UD_VERBS_ETH_DGID_CHECK -np 2 "$OUT/mpi_rma_bench.ompi" ;;
            esac
        done
    done
}

# fig WHAT K TEST SIZE COL: one figure of pair K.
fig() { awk -v t="$3" -v s="$4" -v c="$5" '$1 == t && $2 == s { print $c; exit }' "$OUT/$1.$2.txt" 2> /dev/null; }
# perftest's t_avg (us) at SIZE, pair K.
plat() { awk -v s="$3" '$1 == s && NF >= 6 { print $6; exit }' "$OUT/$1.$3.$2.txt" 2> /dev/null; }

# summary: median and range of the per-pair values on stdin, one per line.
summary() {
    sort -g | awk '{ v[++n] = $1 } END { if (!n) { print "-"; exit }
        printf "%.2f (%.2f-%.2f, %d pairs)", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2, v[1], v[n], n }'
}

# ratios WHAT OP SIZE|bw: per pair, WHAT's figure against the raw device's.
ratios() {
    local what=$1 op=$2 s=$3 k a b
    for ((k = 1; k <= PAIRS; k++)); do
        if [ "$s" = bw ]; then
            a=$(fig "$what" $k "$op-bw-$FLAVOR-flush" "$BW_SIZE" 4)
            b=$(perftest_mb "$OUT/ib_$([ "$op" = put ] && echo write || echo read)_bw.$k.txt" "$BW_SIZE")
        else
            a=$(fig "$what" $k "$op-lat-$FLAVOR-flush" "$s" 3)
            case $op in
                put) b=$(plat ib_write_lat $k "$s"); b=$(awk -v b="$b" 'BEGIN { print 2 * b }') ;;
                get) b=$(plat ib_read_lat $k "$s") ;;
                *) b=$(plat "ib_atomic_$op" $k "$s") ;;
            esac
        fi
        awk -v a="$a" -v b="$b" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.4f\n", a / b }'
    done | summary
}

# vs NAME OTHER TEST SIZE COL: per pair, NAME's figure over OTHER's.
vs() {
    local k
    for ((k = 1; k <= PAIRS; k++)); do
        awk -v a="$(fig "$1" $k "$3" "$4" "$5")" -v b="$(fig "$2" $k "$3" "$4" "$5")" \
            'BEGIN { if (a != "" && b + 0 > 0) printf "%.4f\n", a / b }'
    done | summary
}

# against MODE WHAT [NUM]: NUM's (direct's) latencies and bandwidths over
# MODE's, if both ran.
against() {
    local s op n=${3:-direct}
    [[ " $MODES${PEERS:+ ompi} " = *" $1 "* && " $MODES " = *" $n "* ]] || return 0
    echo "# $n against $2 (latency < 1: less time; bandwidth > 1: more MB/s)"
    for s in $LAT_SIZES; do
        for op in put get acc; do echo "$op latency $s B: $(vs "$n" "$1" "$op-lat-$FLAVOR-flush" "$s" 3)"; done
    done
    for op in fop cas; do echo "$op latency 8 B: $(vs "$n" "$1" "$op-lat-$FLAVOR-flush" 8 3)"; done
    [ "$BW_SIZE" = 0 ] && return 0
    for op in put get; do echo "$op bandwidth: $(vs "$n" "$1" "$op-bw-$FLAVOR-flush" "$BW_SIZE" 4)"; done
}

report() {
    local s m op
    echo "# ch3:rdma one-sided over verbs (Soft-RoCE, TCG), $FLAVOR windows, $PAIRS pairs in one boot; medians of per-pair ratios (range)"
    echo "# latency: put vs 2 x ib_write_lat t_avg (target <= 1.25), get vs ib_read_lat t_avg (target <= 1.15)"
    for s in $LAT_SIZES; do
        for op in put get; do
            for m in $MODES; do
                echo "$op latency $s B, $m: $(ratios "$m" "$op" "$s")"
            done
        done
    done
    echo "# atomics on one int64: vs ib_atomic_lat t_avg (FETCH_AND_ADD, CMP_AND_SWAP)"
    for op in fop cas; do
        for m in $MODES; do echo "$op latency 8 B, $m: $(ratios "$m" "$op" 8)"; done
    done
    if [ "$BW_SIZE" != 0 ]; then
        echo "# bandwidth $BW_SIZE B: vs ib_write_bw / ib_read_bw (target >= 0.95)"
        for op in put get; do
            for m in $MODES; do
                echo "$op bandwidth, $m: $(ratios "$m" "$op" bw)"
            done
        done
    fi
    against am "active messages"
    against nobounce "direct without bounce buffers (RMA_BCOPY_MAX=0)"
    against nic "direct with the hints that let the NIC do accumulates"
    against ompi "Open MPI over UCX (osc ucx)"
    against ompi "Open MPI over UCX (osc ucx)" nic
}

main() {
    local p m
    LAT_SIZES="8 4096" BW_SIZE=4194304 REPS=3 PAIRS=3 OUT="" HELP="" GUEST="" PEERS=""
    MODES="direct am" FLAVOR=allocate
    parse_options "out lat-sizes bw-size reps pairs guest modes flavor" "help peers" "$@"
    [[ $FLAVOR =~ ^(allocate|create|dynamic|coll)$ ]] ||
        die "--flavor: $FLAVOR? allowed allocate, create, dynamic, coll"
    [ -z "$HELP" ] || usage
    for m in $MODES; do
        [[ $m =~ ^(direct|am|nobounce|nic)$ ]] || die "--modes: $m? allowed direct, am, nobounce, nic"
    done
    [[ " $MODES " = *" direct "* ]] || die "--modes $MODES: direct is required (the figures are its)"
    if [ -n "$GUEST" ]; then
        IFS=, read -r p OMPI <<< "$GUEST"
        guest "$p"
        return
    fi
    OMPI=
    OUT=${OUT:-$(default_out vm-rma)}
    mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
    p=$(prefix_of rdma)
    cp "$(bench_binary rdma "$p" mpi_rma_bench)" "$OUT/mpi_rma_bench.rdma"
    if [ -n "$PEERS" ]; then
        peer_installed openmpi || die "Open MPI is not installed (build-aux/install-deps.sh peers)"
        OMPI=$(peer_prefix debian-openmpi)
        cp "$(bench_binary debian-openmpi "$OMPI" mpi_rma_bench)" "$OUT/mpi_rma_bench.ompi"
    fi
    log "booting the Soft-RoCE VM; results in $OUT"
    "$TOP/test/softroce/run-vm" --timeout 5400 --rw "$OUT" -- "$0" --guest "$p,$OMPI" --out "$OUT" \
        --lat-sizes "$LAT_SIZES" --bw-size "$BW_SIZE" --reps "$REPS" --pairs "$PAIRS" \
        --modes "$MODES" --flavor "$FLAVOR" ${PEERS:+--peers}
    report | tee "$OUT/compare.txt"
}

main "$@"
