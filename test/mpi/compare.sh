#!/usr/bin/env bash
# compare.sh [DIRS] [OUT] -- MPICH's test/mpi directories against ch3:nemesis
# and ch3:rdma (shm natively, verbs inside the Soft-RoCE VM); prints pass
# counts and every test that passes on nemesis but not on rdma.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
dirs=${1:-init,pt2pt,datatype,comm,errhan,coll,rma}
out=${2:-$TOP/results/testsuite-$(date +%Y%m%d-%H%M)}
mkdir -p "$out" && out=$(cd "$out" && pwd)
ts=$TOP/test/mpi/testsuite.sh
"$ts" nemesis "$dirs" "$out"
"$ts" rdma "$dirs" "$out"
TESTSUITE_TAG=rdma-verbs "$TOP/test/softroce/run-vm" --timeout 14400 --rw "$out" \
    --env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs --env TESTSUITE_TAG=rdma-verbs -- "$ts" rdma "$dirs" "$out"
names() { sed -n 's/^ok [0-9]* - \(.*\)/\1/p' "$out/summary-$1.tap" | sort; }
for t in rdma rdma-verbs; do
    echo "passes on nemesis, not on $t:"
    comm -23 <(names nemesis) <(names "$t") | sed 's/^/  /'
done | tee "$out/differences.txt"
echo "results in $out"
