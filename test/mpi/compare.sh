#!/usr/bin/env bash
# compare.sh [DIRS] [OUT] [VM_DIRS] -- MPICH's test/mpi directories against
# ch3:nemesis and ch3:rdma (shm natively), and VM_DIRS (default
# init,errhan,pt2pt,rma,threads: the emulated VM is ~40x slower) on ch3:rdma over
# verbs inside the Soft-RoCE VM; prints pass counts and every test that
# passes on nemesis but not on rdma.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
dirs=${1:-init,pt2pt,datatype,comm,errhan,coll,rma,threads,spawn}
out=${2:-$TOP/results/testsuite-$(date +%Y%m%d-%H%M)}
vmdirs=${3:-init,errhan,pt2pt,rma,threads}
mkdir -p "$out" && out=$(cd "$out" && pwd)
ts=$TOP/test/mpi/testsuite.sh
"$ts" nemesis "$dirs" "$out"
"$ts" rdma "$dirs" "$out"
"$TOP/test/mpi/testsuite-vm.sh" "$vmdirs" "$out"
# names BUILD DIRS: the tests of DIRS that passed on BUILD
names() { sed -n 's/^ok *[0-9]* *- \(.*\) # .*/\1/p' "$out/summary-$1.tap" |
    grep -E "^\./(${2//,/|})/" | sort; }
{
    echo "passes on nemesis, not on rdma (shm):"
    comm -23 <(names nemesis "$dirs") <(names rdma "$dirs") | sed 's/^/  /'
    echo "passes on nemesis, not on rdma (verbs, $vmdirs):"
    comm -23 <(names nemesis "$vmdirs") <(names rdma-verbs "$vmdirs") | sed 's/^/  /'
} | tee "$out/differences.txt"
echo "results in $out"
