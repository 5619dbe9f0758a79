# shellcheck shell=bash source-path=SCRIPTDIR
# common.sh -- helpers shared by npb.sh, main-job.sh and bench.sh (sourced).
# The caller sets PROG (prefix of its messages) before sourcing.
# shellcheck source=../test/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../test/lib.sh"    # TOP, CACHE
shopt -s inherit_errexit    # set -e inside $(...) too

die() { echo "$PROG: $*" >&2; exit 1; }
usage() { sed -n '/^set -e/q; s/^#   /  /p' "$0" >&2; exit 2; }    # the header's usage lines
log() { echo "$PROG: $*" >&2; }

# The project's MPICH builds, and Debian's MPI packages as peers.
PROJECT_BUILDS="rdma sock nemesis"
DEBIAN_PEERS="debian-mpich debian-openmpi"
ALL_BENCHMARKS="bt cg ep ft is lu mg sp"    # NPB 3.4's MPI benchmarks that npb.sh builds
check_benchmarks() {
    local b
    for b in "$@"; do
        [[ " $ALL_BENCHMARKS " == *" $b "* ]] || die "unknown benchmark '$b' (known: $ALL_BENCHMARKS)"
    done
}

# A build spec is LABEL[:VAR=VAL...]; LABEL is a build or BUILD-variant
# (e.g. rdma-basic:MPIR_CVAR_CH3_RDMA_PIPE_MODE=basic runs the rdma build).
spec_label() { echo "${1%%:*}"; }
spec_env() { [[ $1 == *:* ]] && echo "${1#*:}" | tr ':' ' ' || true; }
spec_build() {
    local b; b=$(spec_label "$1")
    until [[ " $PROJECT_BUILDS $DEBIAN_PEERS " == *" $b "* ]]; do
        [[ $b == *-* ]] || die "unknown build '$(spec_label "$1")' (builds: $PROJECT_BUILDS $DEBIAN_PEERS, or BUILD-variant)"
        b=${b%-*}
    done
    echo "$b"
}

# Installed Debian peer (debian-mpich / debian-openmpi)?
peer_installed() { [ -x "/usr/bin/mpicc.${1#debian-}" ] && [ -x "/usr/bin/mpiexec.${1#debian-}" ]; }

# Debian peers get a prefix of links (bin/mpicc, mpifort, mpiexec) in the
# cache, so every build is used the same way, by absolute paths.  Open MPI
# is told it may run as root and oversubscribe the cores.
peer_prefix() {
    local flavour=${1#debian-} p=$CACHE/peers/$1
    peer_installed "$1" || die "$1 is not installed (apt-get install -y ${flavour/openmpi/openmpi-bin})"
    mkdir -p "$p/bin"
    ln -sfn "/usr/bin/mpicc.$flavour" "$p/bin/mpicc"
    ln -sfn "/usr/bin/mpifort.$flavour" "$p/bin/mpifort"
    rm -f "$p/bin/mpiexec"
    # A script, not a link: hydra looks for its proxy beside argv[0].
    printf '#!/bin/sh\nexec /usr/bin/mpiexec.%s %s"$@"\n' "$flavour" \
        "$([ "$flavour" = openmpi ] && echo '--allow-run-as-root --oversubscribe ')" > "$p/bin/mpiexec"
    chmod +x "$p/bin/mpiexec"
    echo "$p"
}

# Is the build installed (the lead's build of it finished)?
build_ready() {
    case " $DEBIAN_PEERS " in *" $1 "*) peer_installed "$1" ;; *) [ -x "$CACHE/4.0.2/$1/bin/mpichversion" ] ;; esac
}

# prefix_of BUILD [wait]: installed prefix of a build; with "wait", poll
# every minute until the lead's build of it has finished.
prefix_of() {
    local n=0
    case " $DEBIAN_PEERS " in *" $1 "*) peer_prefix "$1"; return ;; esac
    until build_ready "$1"; do
        [ "${2-}" = wait ] || die "no ch3:$1 build in $CACHE/4.0.2/$1 (run make / make baselines in $TOP, or wait for it)"
        [ $((n % 10)) = 0 ] && log "waiting for ch3:$1 ($CACHE/4.0.2/$1/bin/mpichversion); polling every minute"
        n=$((n + 1)); sleep 60
    done
    (cd "$CACHE/4.0.2/$1" && pwd -P)
}

# What identifies the MPI of a prefix: rebuild what was built with another.
mpi_identity() {
    echo "$1"
    if [ -x "$1/bin/mpichversion" ]; then "$1/bin/mpichversion"; else "$1/bin/mpiexec" --version; fi
}

# Which libmpi a prefix has now (the rdma build is rebuilt in place):
# "sha256-prefix mtime", or "-" for a prefix without lib/libmpi.so.
lib_id() {
    local l; l=$(readlink -f "$1/lib/libmpi.so" 2>/dev/null) && [ -f "$l" ] || { echo -; return; }
    echo "$(sha256sum < "$l" | cut -c1-12) $(date -r "$l" +%Y-%m-%dT%H:%M)"
}

# Default output directory: results/<date>-<host>[-SUFFIX] in the repository.
default_out() { echo "$TOP/results/$(date +%Y%m%d-%H%M)-$(hostname)${1:+-$1}"; }

# parse_options "VALUE-OPTIONS" "FLAG-OPTIONS" ARGS...: --some-opt VALUE sets
# SOME_OPT=VALUE, a flag --some-flag sets SOME_FLAG=yes; what follows "--"
# goes to the array REST.  Callers set the defaults first.
parse_options() {
    local vals=" $1 " flags=" $2 " o v; shift 2
    REST=()
    while [ $# -gt 0 ]; do
        o=${1#--} v=${1#--}; v=${v//-/_}; v=${v^^}
        if [ "$1" = -- ]; then shift; REST=("$@"); return
        elif [[ $flags == *" $o "* ]]; then printf -v "$v" yes; shift
        elif [[ $vals == *" $o "* ]]; then
            [ $# -ge 2 ] || die "option $1 needs a value"
            printf -v "$v" '%s' "$2"; shift 2
        else die "unknown option '$1' (see --help)"
        fi
    done
}

# bench_binary LABEL PREFIX [PROG]: npb-scripts/progs/PROG.c (default mpi_bench) compiled with
# PREFIX's mpicc, rebuilt when the source or the MPI changes.
bench_binary() {
    local prog=${3:-mpi_bench} dir=$CACHE/bench/$1 id src
    src=$TOP/npb-scripts/progs/$prog.c
    id=$(mpi_identity "$2"; sha256sum < "$src")
    if [ "$(cat "$dir/.identity.$prog" 2>/dev/null)" != "$id" ] || [ ! -x "$dir/$prog" ]; then
        mkdir -p "$dir"
        log "compiling $prog for $1"
        "$2/bin/mpicc" -O2 -Wall -o "$dir/$prog" "$src" || die "compiling $src with $2/bin/mpicc failed"
        echo "$id" > "$dir/.identity.$prog"
    fi
    echo "$dir/$prog"
}

# value LABEL TEST SIZE COLUMN: median of one figure over the rounds' tables.
value() {
    awk -v t="$2" -v n="$3" -v c="$4" '$1 == t && $2 == n { v[++m] = $c }
        END { if (!m) exit
            for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { x = v[j]; v[j] = v[j-1]; v[j-1] = x }
            print m % 2 ? v[(m+1)/2] : sprintf("%.3f", (v[m/2] + v[m/2+1]) / 2) }' "$OUT/$1".*.txt
}

# perftest PROG SIZE ITERS FILE [OPTION...]: one run of perftest PROG against
# itself on rxe0, both sides given OPTIONs (ib_atomic_lat's -A TYPE, say).
# The emulated guest may take seconds to start the server: the client
# retries its connection while the server is up.
perftest() {
    local srv try
    "$1" -d rxe0 -x 1 -s "$2" -n "$3" "${@:5}" > /dev/null 2>&1 &
    srv=$!
    for try in $(seq 30); do
        sleep 1
        "$1" -d rxe0 -x 1 -s "$2" -n "$3" "${@:5}" 127.0.0.1 > "$4" 2>&1 && break
        kill -0 "$srv" 2> /dev/null || break
    done
    grep -q '^ *[0-9]' "$4" || log "$1 -s $2 failed after $try tries (see $4)"
    wait "$srv" || true
}

# perftest_mb FILE SIZE: average bandwidth of a perftest *_bw output, in 10^6 B/s.
perftest_mb() { awk -v s="$2" '$1 == s { printf "%.1f", $4 * 1.048576 }' "$1"; }
