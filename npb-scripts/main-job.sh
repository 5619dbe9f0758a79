#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# main-job.sh -- the main benchmark job: NPB 3.4 on ch3:rdma against the stock
# CH3 builds (and, optionally, Debian's MPICH / Open MPI), with a report.
#
#   main-job.sh [--classes "A"] [--np "4 2"] [--builds "rdma sock nemesis"]
#               [--with-debian-peers] [--reps 3] [--benchmarks "bt cg ..."]
#               [--timeout SEC] [--out DIR] [--wait-builds] [--vm]
#
# --builds takes build specs LABEL[:VAR=VAL...] (e.g. rdma-basic:VAR=VAL runs
# the rdma build with VAR=VAL).  np=2 is the one-rank-per-core comparison on
# a 2-core machine; np=4 oversubscribes.  The MPICH builds are made with the
# repository's top-level build, unless --wait-builds: then wait for builds
# someone else is making.  Results: --out (default results/<date>-<host>/).
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

# The first spec whose build is installed, else the first one (whose build
# prefix_of then waits for): runs start as soon as any build is there.
next_ready() {
    local spec
    for spec in "$@"; do build_ready "$(spec_build "$spec")" && { echo "$spec"; return; }; done
    echo "$1"
}

main() {
    local spec base p failed="" bases="" built="" pending b r
    CLASSES=A NP="4 2" BUILDS=$PROJECT_BUILDS REPS=3 BENCHMARKS="" OUT="" TIMEOUT=1200
    WITH_DEBIAN_PEERS="" WAIT_BUILDS="" VM="" HELP=""
    parse_options "classes np builds reps benchmarks timeout out" "with-debian-peers wait-builds vm help" "$@"
    [ -z "$HELP" ] || usage
    [ -z "$VM" ] || { echo "main-job: --vm: not yet" >&2; exit 2; }
    if [ -n "$WITH_DEBIAN_PEERS" ]; then
        for b in $DEBIAN_PEERS; do
            if peer_installed "$b"; then BUILDS="$BUILDS $b"; else log "$b not installed: left out"; fi
        done
    fi
    for spec in $BUILDS; do
        base=$(spec_build "$spec")
        [[ " $bases " == *" $base "* ]] || bases="$bases $base"
    done
    OUT=${OUT:-$(default_out "")}
    mkdir -p "$OUT"
    log "results go to $OUT"

    ensure_deps
    # shellcheck disable=SC2086
    [ -n "$WAIT_BUILDS" ] || ensure_mpich $bases

    # Rep by rep over the builds, so that other load on the machine hits
    # every build alike; the first rep takes builds as they become ready.
    for r in $(seq "$REPS"); do
        pending=$BUILDS
        while [ -n "$pending" ]; do
            # shellcheck disable=SC2086  # a list of specs
            spec=$(next_ready $pending)
            pending=$(echo " $pending " | sed "s| $spec | |; s|^ *||; s| *$||")
            base=$(spec_build "$spec")
            [[ " $failed " != *" $base "* ]] || continue
            p=$(prefix_of "$base" wait)
            if [[ " $built " != *" $base "* ]]; then
                "$NPB" build --prefix "$p" --name "$base" --classes "$CLASSES" ${BENCHMARKS:+--benchmarks "$BENCHMARKS"} ||
                    { log "NPB does not build for $base: its runs are left out"; failed="$failed $base"; continue; }
                built="$built $base"
            fi
            "$NPB" run --prefix "$p" --name "$base" --label "$(spec_label "$spec")" --env "$(spec_env "$spec")" \
                --classes "$CLASSES" --np "$NP" --reps "$REPS" --rep "$r" --timeout "$TIMEOUT" \
                ${BENCHMARKS:+--benchmarks "$BENCHMARKS"} --out "$OUT"
        done
    done

    "$NPB" report --out "$OUT"
    [ -z "$failed" ] || log "NPB build failed for:$failed (logs under $CACHE/npb/<build>/logs/)"
    log "report: $OUT/report.md; plot: $OUT/report.png; raw: $OUT/results.csv, $OUT/logs/"
}

main "$@"
