#!/usr/bin/env bash
# npb.sh report on made-up results: medians and minima of verified reps, ratios to
# nemesis, FAIL cells, summary lines (no MPI needed).
. "$(dirname "$0")/../lib.sh"
plan 13
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
cat > "$D/results.csv" <<'CSV'
build,benchmark,class,np,rep,seconds,verified
nemesis,cg,A,2,1,2.00,yes
nemesis,cg,A,2,2,4.00,yes
nemesis,cg,A,2,3,3.00,yes
nemesis,is,A,2,1,1.00,yes
rdma,cg,A,2,1,1.50,yes
rdma,is,A,2,1,,timeout
sock,cg,A,2,1,6.00,yes
sock,is,A,2,1,2.00,yes
CSV
echo "Run in the test bed: ranks round-robin over hosts node0,node1" > "$D/context.txt"
printf 'nemesis,/p/n,-,\nrdma,/p/r,abc 2026-01-01T00:00,X=1\nsock,/p/s,-,\n' > "$D/builds.csv"
out=$("$TOP/npb-scripts/npb.sh" report --out "$D" 2>&1); ok $? "report runs"
grep -qx 'cg,A,2,nemesis,3.00,3,0,1.000,2.00,1.000' "$D/summary.csv"; ok $? "median and minimum of three reps, ratio 1 for nemesis"
grep -qx 'cg,A,2,rdma,1.50,1,0,0.500,1.50,0.750' "$D/summary.csv"; ok $? "ratios to nemesis (median, minimum)"
grep -q '| is.A | 1.00 (1.00) | FAIL (1/1) | 2.00 (2.00) |' "$D/report.md"; ok $? "FAIL cell for a timed-out run"
echo "$out" | grep -q 'rdma:  class A, np=2: 0.500 over 1, 1 FAIL;'; ok $? "summary line per build"
grep -q '/p/r. (libmpi abc 2026-01-01T00:00) X=1' "$D/report.md"; ok $? "builds, libmpi and environment listed"
grep -qx -- '- Run in the test bed: ranks round-robin over hosts node0,node1' "$D/report.md"; ok $? "where it ran (context.txt) is listed"
out=$("$TOP/npb-scripts/main-job.sh" --vm --nodes 0 2>&1); rc=$?
[ $rc != 0 ] && echo "$out" | grep -q -- "--nodes takes a positive integer, not '0'"; ok $? "main-job rejects --nodes 0 by name"
# A label rerun against another build in the same DIR: its old rows go.
C=$D/cache; T=$C/npb/fake/src/NPB3.4-MPI
mkdir -p "$T/config" "$T/bin" "$D/p1/bin" "$D/p2/bin" "$D/run"
touch "$C/npb/fake/.extracted" "$T/config/make.def.template"
printf '#!/bin/sh\necho " Time in seconds = 1.25"; echo " Verification    =               SUCCESSFUL"\n' > "$T/bin/cg.S.x"
printf '#!/bin/sh\nshift 2; exec "$@"\n' > "$D/p1/bin/mpiexec"
cp "$D/p1/bin/mpiexec" "$D/p2/bin/mpiexec"; chmod +x "$T/bin/cg.S.x" "$D"/p?/bin/mpiexec
run() { CH3RDMA_CACHE=$C "$TOP/npb-scripts/npb.sh" run --prefix "$D/$1" --name fake --label x \
    --classes S --np 1 --reps 2 --benchmarks cg --out "$D/run" > "$D/run.log" 2>&1; }
run p1 && run p1 && [ "$(grep -c '^x,' "$D/run/results.csv")" = 2 ] && grep -q "^x,$D/p1," "$D/run/builds.csv"
ok $? "a rerun of the same build replaces its rows"
run p2 && [ "$(grep -c '^x,' "$D/run/results.csv")" = 2 ] && [ "$(grep -c '^x,' "$D/run/builds.csv")" = 1 ] \
    && grep -q "^x,$D/p2," "$D/run/builds.csv" && grep -q "was another build" "$D/run.log"
ok $? "a label rerun against another build drops the old build's rows and names the new one"
# main-job's order: benchmark by benchmark over the builds, rep by rep (a build's
# benchmarks in a row put a change of the host's speed on one build).
out=$("$TOP/npb-scripts/main-job.sh" --dry-run --builds "rdma nemesis" --reps 2 --benchmarks "cg is" 2>&1)
[ "$(echo $out)" = "1 cg rdma 1 cg nemesis 1 is rdma 1 is nemesis 2 cg rdma 2 cg nemesis 2 is rdma 2 is nemesis" ]
ok $? "main-job runs benchmark by benchmark over the builds, rep by rep (got: $(echo $out))"
out=$("$TOP/npb-scripts/main-job.sh" --dry-run --benchmarks "cg xx" 2>&1); rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "unknown benchmark 'xx'"; ok $? "main-job rejects an unknown benchmark by name"
out=$("$TOP/npb-scripts/vm-lat.sh" --only "imm xx" 2>&1); rc=$?
[ $rc != 0 ] && echo "$out" | grep -q "unknown measurement 'xx'"; ok $? "vm-lat rejects an unknown --only measurement by name"
done_testing
