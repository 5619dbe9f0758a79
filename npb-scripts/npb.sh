#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# npb.sh -- build, run and report the NAS Parallel Benchmarks 3.4 (MPI)
# against an installed MPI prefix.
#
#   npb.sh build  --prefix P --name NAME --classes "S A" [--benchmarks "bt cg ..."]
#   npb.sh run    --prefix P --name NAME [--label LABEL] --classes "A" --np "4 2"
#                 --reps 3 [--rep K] [--benchmarks ...] [--env "VAR=VAL ..."] [--timeout SEC] --out DIR
#   npb.sh report --out DIR
#
# Builds go to $CACHE/npb/NAME (NPB 3.4 sizes its arrays at run time, so one
# binary per benchmark and class serves every rank count).  Runs append to
# DIR/results.csv (build,benchmark,class,np,rep,seconds,verified) with raw
# logs in DIR/logs/; a run counts only if NPB prints "Verification =
# SUCCESSFUL" and mpiexec exits 0.  --rep K runs only rep K of --reps (so
# a caller can interleave builds rep by rep).  report writes DIR/report.md,
# DIR/summary.csv and DIR/report.png.
set -euo pipefail
PROG=npb
. "$(dirname "$0")/common.sh"

NPB_URL=https://www.nas.nasa.gov/assets/npb/NPB3.4.2.tar.gz


# --- build -------------------------------------------------------------------

# NPB source tarball: $NPB_TARBALL, shared/npb beside the repository, or NASA.
npb_tarball() {
    local t=${NPB_TARBALL:-$TOP/../shared/npb/NPB3.4-MPI.tar.gz} dl=$CACHE/npb/NPB3.4.2.tar.gz
    if [ -f "$t" ]; then echo "$t"; return; fi
    [ -z "${NPB_TARBALL-}" ] || die "NPB_TARBALL=$NPB_TARBALL does not exist"
    if [ ! -f "$dl" ]; then
        log "downloading $NPB_URL"
        mkdir -p "$CACHE/npb"
        curl -fsSL -o "$dl.part" "$NPB_URL" && mv "$dl.part" "$dl" ||
            die "cannot download $NPB_URL (no network?); set NPB_TARBALL to an NPB 3.4 tarball"
    fi
    echo "$dl"
}

# Extract NPB once per build name; prints the NPB3.4-MPI directory.
npb_tree() {
    local root=$CACHE/npb/$1 def tgz
    if [ ! -f "$root/.extracted" ]; then
        tgz=$(npb_tarball)
        rm -rf "$root"; mkdir -p "$root/src"
        tar xzf "$tgz" -C "$root/src" || die "cannot extract $tgz"
        touch "$root/.extracted"
    fi
    def=$(find "$root/src" -maxdepth 4 -path '*MPI/config/make.def.template' | head -1)
    [ -n "$def" ] || die "no NPB3.4-MPI/config/make.def.template in the NPB tarball"
    dirname "$(dirname "$def")"
}

# Fortran wrapper: mpifort, or mpif77 of an f77-only MPICH.  NPB 3.4 is
# Fortran 90 with its own modules but only include 'mpif.h' (no "use mpi"),
# which mpif77 (gfortran underneath) compiles as well.
fortran_wrapper() {
    local w
    for w in mpifort mpif77; do [ -x "$1/bin/$w" ] && { echo "$1/bin/$w"; return; }; done
    die "no $1/bin/mpifort or mpif77: is --prefix an installed MPI with Fortran?"
}

# Fortran flags: gfortran >= 10 rejects the mixed buffer types of mpif.h
# calls and the X'..' constants of randi8.f unless told to allow them.
fflags() {
    local t f flags=-O3; t=$(mktemp -d)
    printf 'program t\nend program t\n' > "$t/t.f90"
    for f in -fallow-argument-mismatch -fallow-invalid-boz; do
        "$1" "$f" -c -o "$t/t.o" "$t/t.f90" 2>/dev/null && flags="$flags $f"
    done
    rm -rf "$t"
    echo "$flags"
}

# config/make.def for prefix $1 in tree $2.
write_make_def() {
    local p=$1 tree=$2 fc; fc=$(fortran_wrapper "$p")
    sed -e "s|^MPIFC *=.*|MPIFC = $fc|" \
        -e "s|^FFLAGS\t*=.*|FFLAGS = $(fflags "$fc")|" \
        -e "s|^MPICC *=.*|MPICC = $p/bin/mpicc|" \
        "$tree/config/make.def.template" > "$tree/config/make.def.new"
    [ "$(grep -Ec "^(MPIFC|FFLAGS|MPICC) = ($p|-O3)" "$tree/config/make.def.new")" = 3 ] ||
        die "make.def.template changed shape: cannot set MPIFC, FFLAGS and MPICC"
    mv "$tree/config/make.def.new" "$tree/config/make.def"
}

build_one() {  # build_one TREE NAME BENCH CLASS
    local tree=$1 name=$2 b=$3 c=$4 blog=$CACHE/npb/$2/logs/build-$3.$4.log
    if [ -x "$tree/bin/$b.$c.x" ]; then log "$b.$c for $name is up to date"; return; fi
    log "building $b.$c for $name (log: $blog)"
    mkdir -p "$(dirname "$blog")"
    # Per-class objects (npbparams.h) must not leak from the previous class.
    (cd "$tree/${b^^}" && rm -f ./*.o ./*.mod npbparams.h)
    make -C "$tree" "$b" CLASS="$c" > "$blog" 2>&1 && [ -x "$tree/bin/$b.$c.x" ] ||
        { tail -20 "$blog" >&2; die "building $b.$c for $name failed (log: $blog)"; }
}

cmd_build() {
    local tree stamp id b c
    tree=$(npb_tree "$NAME")
    stamp=$CACHE/npb/$NAME/.mpi-identity
    id=$(mpi_identity "$PREFIX"; fortran_wrapper "$PREFIX")
    if [ "$(cat "$stamp" 2>/dev/null)" != "$id" ]; then
        log "(re)configuring NPB for $NAME with $PREFIX"
        write_make_def "$PREFIX" "$tree"
        make -C "$tree" clean > /dev/null 2>&1 || true
        mkdir -p "$tree/bin"; rm -f "$tree"/bin/*.x
        echo "$id" > "$stamp"
    fi
    for c in $CLASSES; do
        for b in $BENCHMARKS; do build_one "$tree" "$NAME" "$b" "$c"; done
    done
}

# --- run ---------------------------------------------------------------------

is_square() { local r=1; while [ $((r * r)) -lt "$1" ]; do r=$((r + 1)); done; [ $((r * r)) = "$1" ]; }

# forget_rows LABEL BENCH CLASS NP [REP]: drop earlier rows of the same
# label/benchmark/class/np (and rep), so a re-run replaces them.
forget_rows() {
    local csv=$OUT/results.csv
    awk -F, -v k="$1,$2,$3,$4" -v rep="${5-}" \
        'NR == 1 || $1 "," $2 "," $3 "," $4 != k || (rep != "" && $5 != rep)' "$csv" > "$csv.tmp"
    mv "$csv.tmp" "$csv"
}

# One run: prints "SECONDS VERIFIED" (VERIFIED: yes, no, timeout, exitN).
run_once() {  # run_once LOG NP BINARY
    local rc=0 secs busy
    # Other jobs on the machine skew the times: say so in the log and on stderr.
    # The fewest of 5 samples 0.1 s apart: the sampling itself is runnable.
    busy=$(for _ in 1 2 3 4 5; do awk '$1 == "procs_running" { print $2 - 1 }' /proc/stat; sleep 0.1; done |
        sort -n | head -1)
    echo "# npb.sh: $busy other runnable processes before the run, $(nproc) cores" > "$1"
    [ "$busy" -lt 1 ] || log "note: $busy other runnable processes on $(nproc) cores before this run"
    # shellcheck disable=SC2086  # ENV is a list of VAR=VAL words
    (cd "$OUT/work" && timeout -k 30 "$TIMEOUT" env $ENV "$PREFIX/bin/mpiexec" -n "$2" "$3" < /dev/null) \
        >> "$1" 2>&1 || rc=$?
    secs=$(awk '/Time in seconds/ { print $NF; exit }' "$1")
    if [ $rc = 124 ] || [ $rc = 137 ]; then echo "- timeout"
    elif [ $rc != 0 ]; then echo "- exit$rc"
    elif grep -Eq 'Verification +=[[:space:]]+SUCCESSFUL' "$1" && [ -n "$secs" ]; then echo "$secs yes"
    else echo "- no"
    fi
}

# DIR/builds.csv: what each label ran.  A label now naming another build
# or environment than before in DIR loses its earlier rows, or the report
# would list one build beside another one's times.
note_build() {
    local id csv=$OUT/builds.csv res=$OUT/results.csv
    id="$LABEL,$PREFIX,$(lib_id "$PREFIX"),$ENV"
    grep -qxF -- "$id" "$csv" 2>/dev/null && return
    if grep -q "^$LABEL," "$csv" 2>/dev/null; then
        log "$LABEL in $OUT was another build ($(grep "^$LABEL," "$csv" | cut -d, -f2-3)): its results there are dropped"
        awk -F, -v l="$LABEL" '$1 != l' "$csv" > "$csv.tmp" && mv "$csv.tmp" "$csv"
        awk -F, -v l="$LABEL" 'NR == 1 || $1 != l' "$res" > "$res.tmp" && mv "$res.tmp" "$res"
    fi
    echo "$id" >> "$csv"
}

cmd_run() {
    local tree np c b r bin rlog secs ok
    [ -n "$OUT" ] || die "run needs --out DIR"
    [ -f "$CACHE/npb/$NAME/.extracted" ] || die "no NPB build named $NAME: run npb.sh build --name $NAME first"
    tree=$(npb_tree "$NAME")
    mkdir -p "$OUT/logs/$LABEL" "$OUT/work"
    [ -f "$OUT/results.csv" ] || echo "build,benchmark,class,np,rep,seconds,verified" > "$OUT/results.csv"
    note_build
    for np in $NP; do for c in $CLASSES; do for b in $BENCHMARKS; do
        if [[ $b == bt || $b == sp ]] && ! is_square "$np"; then
            log "skipping $b.$c at np=$np (needs a square rank count)"; continue
        fi
        bin=$tree/bin/$b.$c.x
        [ -x "$bin" ] || die "$bin missing: run npb.sh build --name $NAME --classes $c first"
        forget_rows "$LABEL" "$b" "$c" "$np" "$REP"
        for r in ${REP:-$(seq "$REPS")}; do
            rlog=$OUT/logs/$LABEL/$b.$c.np$np.rep$r.log
            log "running $b.$c np=$np rep $r/$REPS for $LABEL"
            read -r secs ok < <(run_once "$rlog" "$np" "$bin")
            if [ "$ok" = yes ]; then
                log "$b.$c np=$np $LABEL: $secs s, verified"
                echo "$LABEL,$b,$c,$np,$r,$secs,yes" >> "$OUT/results.csv"
            else
                log "$b.$c np=$np $LABEL: FAILED ($ok; log: $rlog)"
                echo "$LABEL,$b,$c,$np,$r,,$ok" >> "$OUT/results.csv"
            fi
        done
    done; done; done
}

# --- report ------------------------------------------------------------------

# summary.csv: one row per build/benchmark/class/np with the median and the
# minimum of the verified reps and their ratios to ch3:nemesis (empty when
# unknown).  The minimum is less sensitive to other load on the machine.
summarize() {
    awk -F, 'NR > 1 {
        k = $2 "," $3 "," $4 SUBSEP $1
        if (!(k in n)) { n[k] = 0; order[++nk] = k }
        if ($7 == "yes") v[k, ++n[k]] = $6; else fail[k]++
    }
    function sort_reps(k,   i, j, t) {
        for (i = 1; i <= n[k]; i++) a[i] = v[k, i]
        for (i = 2; i <= n[k]; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    }
    function ratio(x, y) { return (x + 0 > 0 && y + 0 > 0) ? sprintf("%.3f", x / y) : "" }
    function secs(x) { return x == "" ? "" : sprintf("%.2f", x) }
    END {
        print "benchmark,class,np,build,median_seconds,reps_ok,reps_failed,ratio_to_nemesis,min_seconds,min_ratio_to_nemesis"
        for (i = 1; i <= nk; i++) {
            k = order[i]; med[k] = mn[k] = ""
            if (n[k]) { sort_reps(k); m = n[k]; mn[k] = a[1]; med[k] = m % 2 ? a[(m+1)/2] : (a[m/2] + a[m/2+1]) / 2 }
        }
        for (i = 1; i <= nk; i++) {
            k = order[i]; split(k, kb, SUBSEP); ref = kb[1] SUBSEP "nemesis"
            ok = !fail[k] && !fail[ref]
            printf "%s,%s,%s,%d,%d,%s,%s,%s\n", kb[1], kb[2], secs(med[k]), n[k], fail[k],
                ok ? ratio(med[k], med[ref]) : "", secs(mn[k]), ok ? ratio(mn[k], mn[ref]) : ""
        }
    }' "$OUT/results.csv"
}

# markdown TIME-COLUMN RATIO-COLUMN WHAT: tables of summary.csv (one per
# class and np) and a geometric-mean line per build.
markdown() {
    awk -F, -v t="$1" -v q="$2" -v what="$3" 'NR > 1 {
        grp = "class " $2 ", np=" $3; row = $1 "." $2
        if (!(grp in seen)) { seen[grp] = 1; groups[++ng] = grp }
        if (!((grp, row) in seenr)) { seenr[grp, row] = 1; rows[grp, ++nr[grp]] = row }
        if (!($4 in seenb)) { seenb[$4] = 1; builds[++nb] = $4 }
        cell[grp, row, $4] = $7 ? sprintf("FAIL (%d/%d)", $7, $6 + $7) : \
            sprintf("%.2f", $t) ($q != "" ? sprintf(" (%.2f)", $q) : "")
        if ($q != "") { lg[grp, $4] += log($q); cnt[grp, $4]++ }
        if ($7) nfail[grp, $4]++
        ran[grp, $4] = 1
    }
    END {
        for (g = 1; g <= ng; g++) {
            grp = groups[g]
            printf "\n### %s: %s\n\nseconds, %s of the verified reps (ratio to ch3:nemesis)\n\n| benchmark |", grp, what, what
            for (b = 1; b <= nb; b++) printf " %s |", builds[b]
            printf "\n|---|"; for (b = 1; b <= nb; b++) printf "---:|"; printf "\n"
            for (r = 1; r <= nr[grp]; r++) {
                printf "| %s |", rows[grp, r]
                for (b = 1; b <= nb; b++) { c = cell[grp, rows[grp, r], builds[b]]; printf " %s |", c == "" ? "-" : c }
                printf "\n"
            }
            printf "| geomean ratio |"
            for (b = 1; b <= nb; b++) { k = grp SUBSEP builds[b]; printf " %s |", cnt[k] ? sprintf("%.3f (%d)", exp(lg[k] / cnt[k]), cnt[k]) : "-" }
            printf "\n"
            for (b = 1; b <= nb; b++) { k = grp SUBSEP builds[b]; if (!ran[k]) continue
                sumline[b] = sumline[b] sprintf("  %s: %s%s;", grp, cnt[k] ? sprintf("%.3f over %d", exp(lg[k] / cnt[k]), cnt[k]) : "n/a", nfail[k] ? sprintf(", %d FAIL", nfail[k]) : "") }
        }
        printf "\n## Summary, %s (geometric mean of time ratios to ch3:nemesis; < 1 is faster)\n\n", what
        for (b = 1; b <= nb; b++) printf "- %s:%s\n", builds[b], sumline[b]
    }' "$OUT/summary.csv"
}

# report.png: grouped bars per benchmark run, ratio to nemesis (or seconds
# when nemesis was not run).
plot() {
    local col=8 what="time ratio to ch3:nemesis (lower is faster)" dat=$OUT/report.dat
    if ! command -v gnuplot > /dev/null; then log "gnuplot missing: no report.png (apt-get install -y gnuplot-nox)"; return; fi
    grep -q ',nemesis,' "$OUT/summary.csv" || { col=5; what="seconds (median)"; }
    awk -F, -v col="$col" 'NR > 1 {
        row = $1 "." $2 "/" $3
        if (!(row in seenr)) { seenr[row] = 1; rows[++nr] = row }
        if (!($4 in seenb)) { seenb[$4] = 1; builds[++nb] = $4 }
        val[row, $4] = ($7 || $col == "") ? "-" : $col
    }
    END {
        printf "run"; for (b = 1; b <= nb; b++) printf " %s", builds[b]; printf "\n"
        for (r = 1; r <= nr; r++) {
            printf "%s", rows[r]; for (b = 1; b <= nb; b++) { v = val[rows[r], builds[b]]; printf " %s", v == "" ? "-" : v }
            printf "\n"
        }
    }' "$OUT/summary.csv" > "$dat"
    rm -f "$OUT/report.png"
    awk 'NR > 1 { for (i = 2; i <= NF; i++) if ($i != "-") found = 1 } END { exit !found }' "$dat" ||
        { log "no verified run to plot: no report.png"; return; }
    gnuplot <<EOF || { rm -f "$OUT/report.png"; log "gnuplot failed: no report.png"; }
set terminal pngcairo size 1200,600 noenhanced
set output "$OUT/report.png"
set title "NPB: $what; missing bar = FAIL or not run"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set datafile missing "-"
set key autotitle columnheader outside right
set xtics rotate by -45
set xlabel "benchmark.class/np"
set yrange [0:*]
set grid ytics
plot for [i=2:$(head -1 "$dat" | wc -w)] "$dat" using i:xtic(1)
EOF
}

cmd_report() {
    [ -s "$OUT/results.csv" ] || die "no $OUT/results.csv: run npb.sh run --out $OUT first"
    summarize > "$OUT/summary.csv"
    {
        echo "# NPB 3.4 MPI results ($(date -u +%Y-%m-%dT%H:%MZ), $(hostname), $(nproc) cores)"
        echo
        echo "Builds (label, prefix, libmpi sha256 and date at the first run, extra environment):"
        echo
        sed 's/^\([^,]*\),\([^,]*\),\([^,]*\),\(.*\)$/- \1: `\2` (libmpi \3) \4/' "$OUT/builds.csv"
        echo
        [ ! -s "$OUT/context.txt" ] || sed 's/^/- /' "$OUT/context.txt"
        echo "- Ranks beyond the core count are oversubscribed: busy-polling channels (ch3:nemesis) suffer there."
        echo "- Runs that started while other processes were runnable (other jobs on the machine skew times):" \
            "$(head -qn1 "$OUT"/logs/*/*.log 2>/dev/null |
                awk '/^# npb.sh: [0-9]+ other runnable/ { n++; b += $3 > 0 } END { printf "%d of %d", b, n }')."
        echo "- FAIL (k/n): k of n reps did not verify, timed out or crashed (logs in logs/)."
        echo "- NPB prints times to 0.01 s; a time of 0.00 gets no ratio."
        markdown 5 8 median
        markdown 9 10 "best (minimum)"
    } > "$OUT/report.md"
    plot
    sed -n '/^### /,$p' "$OUT/report.md"
    log "report: $OUT/report.md, $OUT/summary.csv$( [ -f "$OUT/report.png" ] && echo ", $OUT/report.png")"
}

# --- options -----------------------------------------------------------------

main() {
    [ $# -gt 0 ] || usage
    local cmd=$1 b; shift
    PREFIX="" NAME="" LABEL="" CLASSES="" BENCHMARKS=$ALL_BENCHMARKS NP="" REPS=3 REP="" ENV=""
    OUT="" TIMEOUT=1200 HELP=""
    parse_options "prefix name label classes benchmarks np reps rep env out timeout" help "$@"
    [ -z "$HELP" ] || usage
    [ -z "$PREFIX" ] || [ -d "$PREFIX" ] || die "--prefix $PREFIX: no such directory"
    [ -z "$PREFIX" ] || PREFIX=$(cd "$PREFIX" && pwd -P)
    # shellcheck disable=SC2086  # a list
    check_benchmarks $BENCHMARKS
    case "$cmd" in
        build|run)
            [ -n "$PREFIX" ] && [ -n "$NAME" ] && [ -n "$CLASSES" ] || die "$cmd needs --prefix, --name and --classes"
            LABEL=${LABEL:-$NAME} ;;&
        build) cmd_build ;;
        run) [ -n "$NP" ] || die "run needs --np"; cmd_run ;;
        report) [ -n "$OUT" ] || die "report needs --out DIR"; cmd_report ;;
        *) usage ;;
    esac
}

main "$@"
