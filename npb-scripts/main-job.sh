#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# main-job.sh -- the main benchmark job: NPB 3.4 on ch3:rdma against the stock
# CH3 builds (and, optionally, Debian's MPICH / Open MPI), with a report.
#
#   main-job.sh [--classes "A"] [--np "4 2"] [--builds "rdma sock nemesis"]
#               [--with-debian-peers] [--reps 3] [--benchmarks "bt cg ..."]
#               [--timeout SEC] [--out DIR] [--wait-builds] [--dry-run]
#               [--vm [--nodes 2] [--vms]]   (then --classes "S W" --np 4 by default)
#
# --builds takes build specs LABEL[:VAR=VAL...] (e.g. rdma-basic:VAR=VAL runs
# the rdma build with VAR=VAL).  np=2 is the one-rank-per-core comparison on
# a 2-core machine; np=4 oversubscribes.  The MPICH builds are made with the
# repository's top-level build, unless --wait-builds: then wait for builds
# someone else is making.  Results: --out (default results/<date>-<host>/).
# Runs go benchmark by benchmark over the builds, rep by rep (--dry-run
# prints that order and exits).
# --vm runs the benchmarks in the Soft-RoCE test bed (test/softroce/run-vm)
# on --nodes host names, ranks round-robin over them, ch3:rdma forced onto
# verbs for every peer, with perftest on rxe0 in the same boot as the raw
# reference; --hosts H1,H2 is how the guest side is told.  --vms boots one VM
# per node (own kernels, one Ethernet link) with Slurm, and the job runs inside
# salloc: Hydra launches through Slurm (srun), as on a cluster; the guest side
# is told with --slurm.
set -euo pipefail
PROG=main-job
. "$(dirname "$0")/common.sh"
NPB=$(dirname "$0")/npb.sh


# Debian packages: the lead's installer, else check and print the apt line.
ensure_deps() {
    local groups=npb
    [ -n "$WAIT_BUILDS" ] || groups="npb build"
    if [ -f "$TOP/build-aux/install-deps.sh" ]; then
        # shellcheck disable=SC2086
        bash "$TOP/build-aux/install-deps.sh" $groups ||
            die "missing Debian packages (see above)"
        return
    fi
    command -v gfortran > /dev/null || die "gfortran missing: apt-get install -y gfortran gnuplot-nox"
    command -v gnuplot > /dev/null || log "gnuplot missing, no plot: apt-get install -y gnuplot-nox"
}

# Build the project's MPICH builds that the specs need: the top-level
# make (rdma) / make baselines (sock, nemesis), or build-mpich.sh directly.
ensure_mpich() {
    local need=" $* " b
    if [ -x "$TOP/configure" ]; then
        [ -f "$TOP/Makefile" ] || (cd "$TOP" && ./configure) >&2 || die "./configure failed in $TOP"
        [[ $need != *" rdma "* ]] || make -C "$TOP" >&2 || die "make (ch3:rdma) failed in $TOP"
        [[ $need != *" sock "* && $need != *" nemesis "* ]] || make -C "$TOP" baselines >&2 ||
            die "make baselines failed in $TOP"
    else
        for b in $PROJECT_BUILDS; do
            [[ $need != *" $b "* ]] || "$TOP/channel/build-mpich.sh" "$b" || die "building ch3:$b failed"
        done
    fi
}

# NPB binaries of one build (a no-op when they are up to date).
npb_build() {
    # shellcheck disable=SC2086
    "$NPB" build --prefix "$(prefix_of "$1" wait)" --name "$1" --classes "$CLASSES" \
        ${BENCHMARKS:+--benchmarks "$BENCHMARKS"}
}

# In the one-VM test bed ch3:rdma talks verbs to every peer, unless the spec says; with
# --vms it chooses as on a cluster (shm inside a VM, verbs between VMs).
vm_spec() {
    if [ -z "$VMS" ] && [ "$(spec_build "$1")" = rdma ] && [[ $1 != *MPIR_CVAR_CH3_RDMA_TRANSPORT=* ]]; then
        echo "$1:MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs"
    else echo "$1"; fi
}

# --vm: with the MPICH builds made, build NPB here, then run this job in the
# test bed (guest side --wait-builds --hosts).  Debian's MPIs are left out: they launch differently.
run_in_vm() {
    local specs="" spec base
    for spec in $BUILDS; do
        base=$(spec_build "$spec")
        if [[ " $DEBIAN_PEERS " == *" $base "* ]]; then log "$spec: Debian's MPIs are not run in the VM"; continue; fi
        specs="$specs $(vm_spec "$spec")"
    done
    [ -n "$specs" ] || die "--vm: no ch3 build to run"
    bash "$TOP/build-aux/install-deps.sh" vm || die "missing Debian packages (see above)"
    for base in $BASES; do [[ " $DEBIAN_PEERS " == *" $base "* ]] || npb_build "$base" || die "NPB does not build for $base"; done
    local vm=(--nodes "$NODES" --mem 4096) inner
    # shellcheck disable=SC2016  # $CH3RDMA_NODES is the guest's
    inner='exec "$0" "$@" --hosts "$CH3RDMA_NODES"'
    if [ -n "$VMS" ]; then
        log "running in the Soft-RoCE test bed, $NODES VMs under Slurm (ch3:rdma: verbs between VMs)"
        vm+=(--vms --slurm)
        # every rank count of --np fits the allocation; Hydra launches through srun
        inner="exec salloc -N $NODES -n $(tr ' ' '\n' <<< "$NP" | sort -n | tail -1) env -u HYDRA_LAUNCHER \"\$0\" \"\$@\" --slurm"
    else
        log "running in the Soft-RoCE test bed, $NODES nodes (ranks round-robin, ch3:rdma on verbs)"
    fi
    exec "$TOP/test/softroce/run-vm" "${vm[@]}" --timeout 86400 --rw "$OUT" -- \
        bash -c "$inner" "$TOP/npb-scripts/main-job.sh" --wait-builds --classes "$CLASSES" \
        --np "$NP" --builds "${specs# }" --reps "$REPS" --timeout "$TIMEOUT" --out "$OUT" \
        ${BENCHMARKS:+--benchmarks "$BENCHMARKS"}
}

# The raw device in the same boot (perftest, 1 MiB for bandwidth), one line.
raw_reference() {
    local d=$OUT/raw m=1048576
    mkdir -p "$d"
    perftest ib_write_lat 8 2000 "$d/ib_write_lat.txt"
    perftest ib_write_bw $m 200 "$d/ib_write_bw.txt"
    perftest ib_read_bw $m 200 "$d/ib_read_bw.txt"
    echo "Raw rxe0 in this boot (perftest, $d): ib_write_lat 8 B t_avg" \
        "$(awk '$1 == 8 { print $6 }' "$d/ib_write_lat.txt") us; 1 MiB ib_write_bw" \
        "$(perftest_mb "$d/ib_write_bw.txt" $m) MB/s, ib_read_bw $(perftest_mb "$d/ib_read_bw.txt" $m) MB/s."
}

# --hosts (guest side of --vm): Hydra places the ranks round-robin over them.
use_hosts() {
    tr ',' '\n' <<< "$HOSTS" > "$OUT/hosts"
    export HYDRA_HOST_FILE=$OUT/hosts
    {
        echo "Run in the Soft-RoCE test bed ($(uname -r), rxe0): ranks round-robin over hosts $HOSTS" \
            "(UTS namespaces of one VM); ch3:nemesis and ch3:sock use TCP between hosts."
        [ "${CH3RDMA_DEVICE-}" != rxe0 ] || raw_reference
    } > "$OUT/context.txt"
}

# --slurm (guest side of --vm --vms): inside salloc; Hydra takes the nodes from Slurm.
use_slurm() {
    {
        echo "Run in the Soft-RoCE test bed: $SLURM_JOB_NUM_NODES VMs ($(uname -r) each, rxe0 on" \
            "each VM's NIC, one virtual Ethernet link), in Slurm allocation $SLURM_JOB_ID" \
            "($SLURM_JOB_NODELIST); Hydra launches through Slurm (srun); ch3:nemesis and" \
            "ch3:sock use TCP between the VMs."
        [ "${CH3RDMA_DEVICE-}" != rxe0 ] || raw_reference
    } > "$OUT/context.txt"
}

# The runs in order, one "REP BENCHMARK SPEC" line each: benchmark by
# benchmark over the builds, rep by rep, so that a change in the machine's
# speed or load meets every build alike.  (With a build's benchmarks in a
# row, host D's phase changes landed on one build: cg.A read 0.78 in one
# run and 1.22-1.33 in others against ch3:nemesis.)
schedule() {
    local r b spec
    for r in $(seq "$REPS"); do for b in ${BENCHMARKS:-$ALL_BENCHMARKS}; do for spec in $BUILDS; do
        echo "$r $b $spec"
    done; done; done
}

main() {
    local spec base failed="" b r run runs
    CLASSES="" NP="" BUILDS=$PROJECT_BUILDS REPS=3 BENCHMARKS="" OUT="" TIMEOUT=1200 NODES=2 HOSTS=""
    WITH_DEBIAN_PEERS="" WAIT_BUILDS="" VM="" VMS="" SLURM="" HELP="" BASES="" DRY_RUN=""
    parse_options "classes np builds reps benchmarks timeout out nodes hosts" \
        "with-debian-peers wait-builds vm vms slurm help dry-run" "$@"
    [ -z "$VMS" ] || [ -n "$VM" ] || die "--vms goes with --vm"
    [ -z "$HELP" ] || usage
    if [ -n "$VM" ]; then CLASSES=${CLASSES:-S W} NP=${NP:-4}; else CLASSES=${CLASSES:-A} NP=${NP:-4 2}; fi
    [[ $NODES =~ ^[1-9][0-9]*$ ]] || die "--nodes takes a positive integer, not '$NODES'"
    if [ -n "$WITH_DEBIAN_PEERS" ]; then
        for b in $DEBIAN_PEERS; do
            if peer_installed "$b"; then BUILDS="$BUILDS $b"; else log "$b not installed: left out"; fi
        done
    fi
    for spec in $BUILDS; do
        base=$(spec_build "$spec")
        [[ " $BASES " == *" $base "* ]] || BASES="$BASES $base"
    done
    # shellcheck disable=SC2086  # a list
    check_benchmarks $BENCHMARKS
    [ -z "$DRY_RUN" ] || { schedule; exit 0; }
    OUT=${OUT:-$(default_out "${VM:+vm}")}
    mkdir -p "$OUT"
    OUT=$(cd "$OUT" && pwd -P)
    log "results go to $OUT"

    ensure_deps
    # shellcheck disable=SC2086
    [ -n "$WAIT_BUILDS" ] || ensure_mpich $BASES
    [ -z "$VM" ] || run_in_vm
    [ -z "$HOSTS" ] || use_hosts
    [ -z "$SLURM" ] || use_slurm

    # Every build's NPB binaries first (waiting for builds made elsewhere), so
    # that no run shares the cores with a compiler; then the runs.
    for base in $BASES; do
        npb_build "$base" || { log "NPB does not build for $base: its runs are left out"; failed="$failed $base"; }
    done
    mapfile -t runs < <(schedule)
    for run in "${runs[@]}"; do
        read -r r b spec <<< "$run"
        base=$(spec_build "$spec")
        [[ " $failed " != *" $base "* ]] || continue
        "$NPB" run --prefix "$(prefix_of "$base")" --name "$base" --label "$(spec_label "$spec")" \
            --env "$(spec_env "$spec")" --classes "$CLASSES" --np "$NP" --reps "$REPS" --rep "$r" \
            --benchmarks "$b" --timeout "$TIMEOUT" --out "$OUT"
    done

    "$NPB" report --out "$OUT"
    [ -z "$failed" ] || log "NPB build failed for:$failed (logs under $CACHE/npb/<build>/logs/)"
    log "report: $OUT/report.md; plot: $OUT/report.png; raw: $OUT/results.csv, $OUT/logs/"
}

main "$@"
