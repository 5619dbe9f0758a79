#!/usr/bin/env bash
# mpi_bench on ch3:rdma, 2 ranks: every test prints parseable rows, with
# reused, first-touch and MPI_Alloc_mem buffers, 5% steps, the copy limit,
# non-contiguous messages; bad options fail.  mpi_rma_bench: a row per op,
# test, flavour (the dynamic ones too), sync and size, with the atomics
# hints too; a bad option fails.  ring_walk (no MPI): one row per window,
# a bad window named.
. "$(dirname "$0")/../lib.sh"
plan 17
P=$(mpich_prefix rdma) || exit 1
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
"$P/bin/mpicc" -O2 -o "$W/mpi_bench" "$TOP/npb-scripts/progs/mpi_bench.c" ||
    { echo "Bail out! cannot compile mpi_bench"; exit 1; }
row='^(latency|bw|bibw|msgrate|spectrum|memcpy) +[0-9]+ +[0-9.]+ +[0-9.]+$'
run=("$P/bin/mpiexec" -n 2 "$W/mpi_bench" --reps 1)
# all four tests, 1 B .. 4 MiB: 23 sizes each
n=$(timeout 600 "${run[@]}" --max 4M | grep -Ec "$row")
[ "$n" = 92 ]; ok $? "4 tests x 23 sizes (got $n rows)"
expect_output 0 '^# test size_bytes median_us median_MBps' "header line" -- "${run[@]}" --max 1K --tests latency
expect_output 0 'bw +67108864 ' "first-touch buffers up to 64 MiB" -- "${run[@]}" --first-touch --min 16M --tests bw,bibw
out=$(timeout 300 "${run[@]}" --alloc-mem --min 1M --max 4M --tests latency,bw)
grep -q '^# mpi_bench: .*buffers reused from MPI_Alloc_mem$' <<< "$out" && [ "$(grep -Ec "$row" <<< "$out")" = 6 ]
ok $? "buffers from MPI_Alloc_mem (header says so), 1-4 MiB: 6 rows"
expect_output 0 'msgrate +1102 ' "5% steps" -- "${run[@]}" --steps 5pct --min 1000 --max 1200 --tests msgrate
n=$(timeout 300 "${run[@]}" --tests spectrum --spectrum 10 --max 1K | grep -Ec '^spectrum ')
[ "$n" = 11 ]; ok $? "buffer-reuse spectrum (10 buffers, buffer i used i times): 11 sizes (got $n rows)"
expect_output 1 'a comma-separated list' "unknown test rejected" -- "${run[@]}" --tests latency,nope
# --vector: non-contiguous messages (1 KiB blocks 2 KiB apart), latency only
out=$(timeout 300 "${run[@]}" --vector --tests latency --steps 5pct --min 60000 --max 68000)
grep -q '^# mpi_bench: .*, messages of 1 KiB blocks 2 KiB apart$' <<< "$out" && [ "$(grep -Ec '^latency +[0-9]+ ' <<< "$out")" = 3 ]
ok $? "--vector: 3 latency rows of non-contiguous messages (header says so)"
expect_output 2 'only with --tests latency' "--vector with another test rejected" -- "${run[@]}" --vector --tests latency,bw
# copylimit: per size a latency row, a memcpy row and the ratio's comment
out=$(timeout 300 "${run[@]}" --tests copylimit --min 256K --max 1M)
n=$(grep -Ec "$row" <<< "$out") c=$(grep -Ec '^# copylimit [0-9]+: one-way [0-9]+ MB/s, memcpy [1-9][0-9]* MB/s, ratio [0-9.]+$' <<< "$out")
[ "$n" = 6 ] && [ "$c" = 3 ]; ok $? "copylimit, 256 KiB to 1 MiB: 3 latency and memcpy rows, 3 ratios (got $n rows, $c ratios)"
# mpi_rma_bench: 5 ops x 2 flavours x 4 syncs; put, get, acc: lat and bw at
# 4 and 8 B, fop and cas: lat at 8 B: (3 x 2 x 2 + 2) x 8 = 112 rows
"$P/bin/mpicc" -O2 -o "$W/mpi_rma_bench" "$TOP/npb-scripts/progs/mpi_rma_bench.c" ||
    { echo "Bail out! cannot compile mpi_rma_bench"; exit 1; }
rrow='^(put|get|acc|fop|cas)-(lat|bw)-(create|allocate)-(flush|lock|fence|pscw) +[0-9]+ +[0-9.]+ +[0-9.]+$'
n=$(timeout 600 "$P/bin/mpiexec" -n 2 "$W/mpi_rma_bench" --reps 1 --min 4 --max 8 \
    --syncs flush,lock,fence,pscw | grep -Ec "$rrow")
[ "$n" = 112 ]; ok $? "mpi_rma_bench: 5 ops x 2 flavours x 4 syncs, lat and bw (got $n of 112 rows)"
# the dynamic flavours (attached memory, with and without coll_attach):
# 5 ops x 2 flavours, flush, lat at 8 B
drow='^(put|get|acc|fop|cas)-lat-(dynamic|coll)-flush +8 +[0-9.]+ +[0-9.]+$'
n=$(timeout 300 "$P/bin/mpiexec" -n 2 "$W/mpi_rma_bench" --reps 1 --min 8 --max 8 --tests lat \
    --flavors dynamic,coll | grep -Ec "$drow")
[ "$n" = 10 ]; ok $? "mpi_rma_bench: flavours dynamic and coll, 5 ops (got $n of 10 rows)"
# --nic-hints 1: windows with which_accumulate_ops and disable_shm_accumulate
n=$(timeout 300 "$P/bin/mpiexec" -n 2 "$W/mpi_rma_bench" --reps 1 --min 8 --max 8 --tests lat \
    --ops fop,cas --nic-hints 1 | grep -Ec "$rrow")
[ "$n" = 4 ]; ok $? "mpi_rma_bench --nic-hints 1: fop and cas in windows with the atomics hints (got $n of 4 rows)"
expect_output 2 "unknown 'nope'" "mpi_rma_bench: an unknown sync is named" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_rma_bench" --syncs flush,nope
# mpi_mem (npb-scripts/mem-table.sh): one line, Pss summed over 4 ranks > 4 x the largest
"$P/bin/mpicc" -O2 -o "$W/mpi_mem" "$TOP/npb-scripts/progs/mpi_mem.c" ||
    { echo "Bail out! cannot compile mpi_mem"; exit 1; }
line=$(timeout 300 "$P/bin/mpiexec" -n 4 "$W/mpi_mem" 20 4096 | grep '^mem ')
awk 'NF == 8 && $1 == "mem" && $2 == 4 && $4 > 0 && $3 >= $4 && $3 < 4 * $5 && $6 == 1536 && $7 >= 0 && $8 == 0 { ok = 1 }
    END { exit !ok }' <<< "$line"
ok $? "mpi_mem, 4 ranks: one line with the Pss sum, max, RSS max, ring KiB (3 x 512 KiB), device KiB and network connections (none on one node) ($line)"
gcc -O2 -o "$W/ring_walk" "$TOP/npb-scripts/progs/ring_walk.c" ||
    { echo "Bail out! cannot compile ring_walk"; exit 1; }
n=$("$W/ring_walk" 1 5000 128 16384 | grep -Ec '^ +(128 +[0-9.]+ +1\.00|16384 +[0-9.]+ +[0-9.]+)$')
[ "$n" = 2 ]; ok $? "ring_walk: one row per window, ratios to the first (got $n rows)"
expect_output 2 'window 100: a multiple of 128' "ring_walk: a bad window is named" \
    -- "$W/ring_walk" 1 5000 100
done_testing
