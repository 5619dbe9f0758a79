#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# vm-lat.sh -- small-message latency over verbs in the Soft-RoCE VM, like for
# like and in one boot: ch3:rdma's default arrival (rxe reports no in-order
# placement: small frames verify themselves, larger ones come by write with
# immediate, completion-driven; "wimm", MPIR_CVAR_CH3_RDMA_WRITE_IMM=1, is
# write with immediate for every frame, the default before) against
# perftest's ib_send_lat, and flag polling forced
# (CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER=1, what ib_write_lat assumes) against
# ib_write_lat; each also against the raw device on the channel's own wire
# pattern without MPI (rawimm, rawwrite: test/softroce/verbs_selftest.c
# "lat", one frame per message into the peer's ring, found the same way), which
# splits a ratio to perftest into the device's cost of that pattern and the
# software's (opt-in through --only, what more software per message costs
# in this boot: rawtouch, rawwrite with each process writing 64 more pages
# per message, LAT_TOUCH; rawcalls, rawimm with each process calling 64
# distinct functions per message, LAT_CALLS); with --peers also Open MPI
# over UCX and Debian's MPICH (ch4:ucx) on rxe0 with the settings of
# test/softroce/peers.md; opt-in, eager: imm without CH3's rendezvous up
# to 1 MiB (MPIR_CVAR_CH3_RDMA_EAGER_MAX=1048576: the channel's zero-copy
# rendezvous alone), for mid-size messages.  Every pair runs all of them
# (the order flips every pair); the report gives per size the median of
# the per-pair ratios, their range and the median latencies
# (half a round trip, mean over ITERS; perftest's t_avg), at the --sizes only.
# --only runs a subset (e.g. "imm ompi mpich": three runs per pair, closer
# in time, so the host's drift spreads the ratios less); the report keeps
# the ratios whose two sides ran.
#
#   vm-lat.sh [--pairs N] [--sizes "8 64 1024 4096"] [--iters N] [--peers] [--generic-crc]
#             [--only "send imm wimm eager write flag rawimm rawwrite rawtouch rawcalls ompi mpich"]
#             [--out DIR]
#
# The VM is emulated (TCG): only ratios from one boot mean anything.  One
# artefact of it: rdma_rxe computes the RoCE ICRC in software, and the
# guest kernel's crc32 takes its PCLMUL path (kernel_fpu_begin, an FPU state
# save that is slow under TCG) from about 79 payload bytes on, so every
# packet from there costs several us more (ib_send_lat: 41 us at 72 B, 47
# at 78 B in one boot).  A NIC computes the ICRC in hardware and has no such
# step.  --generic-crc boots with crc32_pclmul blacklisted (table crc32 at
# every size) to measure without it; the report says which was used.
set -euo pipefail
PROG=vm-lat
. "$(dirname "$0")/common.sh"
UCX_RXE=("UCX_TLS=rc,self" UCX_NET_DEVICES=rxe0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n)

# ib_*_lat TOOL SIZE FILE: one perftest run, appended as mpi_bench prints
# latency ("latency SIZE US", perftest's t_avg).
lat_perftest() {
    perftest "$1" "$2" "$ITERS" "$3.tmp"
    awk -v s="$2" '$1 == s && NF >= 6 { print "latency", s, $6 }' "$3.tmp" >> "$3"
    rm -f "$3.tmp"
}

# One mpi_bench run over all sizes: LABEL FILE MPIEXEC...
lat_mpi() {
    local label=$1 out=$2
    shift 2
    "$@" --tests latency --min "$LO" --max "$HI" --reps 1 --iters "$ITERS" --warmup 200 \
        > "$out.tmp" 2>&1 || log "$label failed (see $out.err)"
    grep '^latency' "$out.tmp" > "$out" || cp "$out.tmp" "$out.err"
    rm -f "$out.tmp"
}

# One measurement LABEL into FILE (inside the VM).
measure() {
    local s v=MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs op=write touch=0 calls=0
    case $1 in
        send | write) for s in $SIZES; do lat_perftest "ib_$1_lat" "$s" "$2"; done ;;
        rawimm | rawwrite | rawtouch | rawcalls) read -ra s <<< "$SIZES"
            [[ $1 != rawimm && $1 != rawcalls ]] || op=imm
            [ "$1" = rawtouch ] && touch=64
            [ "$1" = rawcalls ] && calls=64
            env LAT_TOUCH=$touch LAT_CALLS=$calls "$OUT/verbs_selftest" "$CH3RDMA_DEVICE" lat $op \
                "$ITERS" "${s[@]}" \
            > "$2.log" 2>&1 || log "$1 failed (see $2.log)"
            grep '^latency' "$2.log" > "$2" || true ;;
        imm) lat_mpi "$@" env "$v" "$RDMA/bin/mpiexec" -n 2 "$OUT/mpi_bench.rdma" ;;
        wimm) lat_mpi "$@" env "$v" MPIR_CVAR_CH3_RDMA_WRITE_IMM=1 "$RDMA/bin/mpiexec" -n 2 \
            "$OUT/mpi_bench.rdma" ;;
        eager) lat_mpi "$@" env "$v" MPIR_CVAR_CH3_RDMA_EAGER_MAX=1048576 "$RDMA/bin/mpiexec" -n 2 \
            "$OUT/mpi_bench.rdma" ;;
        flag) lat_mpi "$@" env "$v" CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER=1 "$RDMA/bin/mpiexec" -n 2 \
            "$OUT/mpi_bench.rdma" ;;
        ompi) lat_mpi "$@" env "${UCX_RXE[@]}" OMPI_MCA_orte_tmpdir_base=/dev/shm OMPI_MCA_pml=ucx \
            OMPI_MCA_btl=self "$OMPI/bin/mpiexec" -x UCX_TLS -x UCX_NET_DEVICES \
            -x UCX_UD_VERBS_ETH_DGID_CHECK -np 2 "$OUT/mpi_bench.ompi" ;;
        mpich) lat_mpi "$@" env "${UCX_RXE[@]}" "$MPICH/bin/mpiexec" -n 2 "$OUT/mpi_bench.mpich" ;;
    esac
}

# Inside the VM: PAIRS rounds of every measurement in ONLY.
guest() {
    local i m order
    for i in $(seq "$PAIRS"); do
        order=$ONLY
        ((i % 2)) || order=$(tr ' ' '\n' <<< "$ONLY" | tac | tr '\n' ' ')
        for m in $order; do
            : > "$OUT/$m.$i.txt"
            measure "$m" "$OUT/$m.$i.txt"
        done
        log "pair $i of $PAIRS done"
    done
}

# Per size: median (min, max) over the pairs of A/B, and the median latencies;
# nothing unless both ran.
ratio_line() {
    local a=$1 b=$2 i
    [[ " $ONLY " == *" $a "* && " $ONLY " == *" $b "* ]] || return 0
    for i in $(seq "$PAIRS"); do
        awk -v i="$i" -v sizes=" $SIZES " 'FNR == NR { o[$2] = $3; next }
            ($2 in o) && o[$2] > 0 && o[$2] < 1e9 && $3 < 1e9 && index(sizes, " " $2 " ") {
                print $2, $3 / o[$2], o[$2], $3 }' \
            "$OUT/$b.$i.txt" "$OUT/$a.$i.txt"
    done | sort -k1,1n -k2,2g | awk -v a="$a" -v b="$b" '
        function med(v, n) { return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
        function sortv(v, n,   i, j, x) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { x = v[j]; v[j] = v[j-1]; v[j-1] = x } }
        function flush() { if (!n) return; sortv(x, n); sortv(y, n)
            printf "%-12s %8s %6d %7.2f %7.2f %7.2f %10.2f %10.2f\n", a "/" b, s, n, med(r, n), r[1], r[n], med(x, n), med(y, n); n = 0 }
        $1 != s { flush(); s = $1 }
        { n++; r[n] = $2; y[n] = $3; x[n] = $4 }
        END { flush() }'
}

report() {
    printf "%-12s %8s %6s %7s %7s %7s %10s %10s\n" "a/b" size pairs median min max "a us" "b us"
    ratio_line imm send
    ratio_line imm wimm
    ratio_line imm write
    ratio_line eager imm
    ratio_line eager write
    ratio_line wimm send
    ratio_line flag write
    ratio_line imm rawimm
    ratio_line flag rawwrite
    ratio_line rawimm send
    ratio_line rawwrite write
    ratio_line rawtouch rawwrite
    ratio_line rawcalls rawimm
    ratio_line imm ompi
    ratio_line imm mpich
    ratio_line wimm ompi
    ratio_line wimm mpich
    ratio_line flag ompi
    ratio_line flag mpich
    echo "# imm: ch3:rdma default (small frames self-verifying, others write with immediate);"
    echo "# wimm: write with immediate for every frame (WRITE_IMM=1); flag: flag polling forced;"
    echo "# eager: imm with no CH3 rendezvous up to 1 MiB (EAGER_MAX=1048576: the channel's alone);"
    echo "# send/write: ib_send_lat/ib_write_lat t_avg; rawimm/rawwrite: the raw device on the channel's"
    echo "# wire pattern (verbs_selftest lat); rawtouch: rawwrite writing 64 more pages per message;"
    echo "# rawcalls: rawimm calling 64 distinct functions per message;"
    echo "# ompi: Open MPI pml ucx; mpich: Debian MPICH ch4:ucx"
}

# ONLY: the measurements to run, each known and once (default: perftest and
# both modes, with --peers the peers too); naming a peer implies --peers.
check_only() {
    local m seen=" "
    ONLY=${ONLY:-send imm wimm write flag rawimm rawwrite${PEERS:+ ompi mpich}}
    for m in $ONLY; do
        [[ " send imm wimm eager write flag rawimm rawwrite rawtouch rawcalls ompi mpich " == *" $m "* ]] ||
            die "--only: unknown measurement '$m' (send imm wimm eager write flag rawimm rawwrite" \
                "rawtouch rawcalls ompi mpich)"
        [[ $seen != *" $m "* ]] || die "--only: '$m' named twice"
        seen+="$m "
        [[ $m != ompi && $m != mpich ]] || PEERS=yes
    done
    [ -n "${ONLY// /}" ] || die "--only: no measurement named"
}

main() {
    local s
    PAIRS=11 SIZES="8 64 1024 4096" ITERS=3000 OUT="" PEERS="" GUEST="" HELP="" GENERIC_CRC=""
    ONLY=""
    parse_options "pairs sizes iters out guest only" "peers help generic-crc" "$@"
    [ -z "$HELP" ] || usage
    check_only
    [[ $PAIRS =~ ^[1-9][0-9]*$ ]] || die "--pairs takes a positive integer (got '$PAIRS')"
    [[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "--iters takes a positive integer (got '$ITERS')"
    for s in $SIZES; do [[ $s =~ ^[1-9][0-9]*$ ]] || die "--sizes takes byte counts (got '$s')"; done
    LO=$(tr ' ' '\n' <<< "$SIZES" | sort -n | head -1) HI=$(tr ' ' '\n' <<< "$SIZES" | sort -n | tail -1)
    if [ -n "$GUEST" ]; then
        IFS=, read -r RDMA OMPI MPICH <<< "$GUEST"
        guest
        return
    fi
    OUT=${OUT:-$(default_out vm-lat)}
    mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
    RDMA=$(prefix_of rdma) OMPI=- MPICH=-
    cp "$(bench_binary rdma "$RDMA")" "$OUT/mpi_bench.rdma"
    cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$OUT/verbs_selftest" \
        "$TOP/test/softroce/verbs_selftest.c" "$TOP/test/softroce/lat_calls.c" -libverbs ||
        die "cannot build verbs_selftest"
    if [ -n "$PEERS" ]; then
        OMPI=$(prefix_of debian-openmpi) MPICH=$(prefix_of debian-mpich)
        cp "$(bench_binary debian-openmpi "$OMPI")" "$OUT/mpi_bench.ompi"
        cp "$(bench_binary debian-mpich "$MPICH")" "$OUT/mpi_bench.mpich"
    fi
    log "booting the Soft-RoCE VM; $PAIRS pairs; results in $OUT"
    CH3RDMA_VM_APPEND="${CH3RDMA_VM_APPEND:-} ${GENERIC_CRC:+module_blacklist=crc32_pclmul}" \
        "$TOP/test/softroce/run-vm" --timeout $((PAIRS * 900)) --rw "$OUT" -- "$0" \
        --guest "$RDMA,$OMPI,$MPICH" --pairs "$PAIRS" --sizes "$SIZES" --iters "$ITERS" \
        --out "$OUT" --only "$ONLY"
    { echo "# vm-lat: $PAIRS alternating pairs in one boot, $ITERS round trips after 200, rdma $RDMA"
      echo "# measurements in each pair: $ONLY"
      if [ -n "$GENERIC_CRC" ]; then echo "# guest crc32: generic only (crc32_pclmul blacklisted)"
      else echo "# guest crc32: as booted (PCLMUL from about 79 bytes)"; fi
      report; } | tee "$OUT/vm-lat.txt"
}

main "$@"
