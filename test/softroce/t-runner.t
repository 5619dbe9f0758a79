#!/bin/bash
# TAP: run-vm features, in one VM boot: arguments and environment passed intact, cwd and /tmp
# writable and shared with the host, root with unlimited memlock, /dev/shm and /dev/fd, --nodes host
# names through node-exec (directly, hydra-style, and through Debian's mpiexec.mpich if present).
# Usage: prove test/softroce/t-runner.t
set -euo pipefail
. "$(dirname "$0")/common.sh"
mkdir -p "$SOFTROCE_CACHE"
work=$(mktemp -d "$SOFTROCE_CACHE/t-runner.XXXXXX")   # outside /tmp: its own writable share
tmpf=$(mktemp /tmp/softroce-t-runner.XXXXXX)
trap 'rm -rf "$work" "$tmpf"' EXIT
cd "$work"

echo "1..8"
export CH3RDMA_T_VALUE=$'a b "$c" \\ \'q\' *\nsecond line'
export T_EXTRA='passed with --env'
guest='
printf "%s|" "$@" >args.out
printenv CH3RDMA_T_VALUE >env.out; printenv T_EXTRA T_SET >>env.out
pwd >pwd.out
echo from-guest >"$TMPF"
{ id -u; ulimit -l; stat -f -c %T /dev/shm; cat < <(echo fd-links); } >root.out
{ hostname; node-exec node2 hostname; node-exec -x node1 "\"/bin/hostname\""; } >nodes.out
if [ -x /usr/bin/mpiexec.mpich ]; then
    /usr/bin/mpiexec.mpich -hosts node0,node1,node2 -n 3 hostname | sort >hydra.out
fi'
rc=0
PATH=$SOFTROCE_DIR:$PATH "$SOFTROCE_DIR/run-vm" --vm --nodes 3 --env T_EXTRA --env T_SET=v1 \
    --env TMPF="$tmpf" -- bash -c "$guest" argv0 'a b' '$HOME' '"q"' '' >run.log 2>&1 || rc=$?
tap $rc "run-vm exits 0"
((rc == 0)) || diag run.log

same() {  # same FILE EXPECTED DESCRIPTION
    if [[ -f $1 && $(<"$1") == "$2" ]]; then tap 0 "$3"; else
        tap 1 "$3"; echo "# want: $2"; [[ -f $1 ]] && diag "$1"; fi
}
same args.out 'a b|$HOME|"q"||' "arguments reach the command intact"
same env.out "$CH3RDMA_T_VALUE"$'\n'"$T_EXTRA"$'\nv1' "CH3RDMA_* and --env variables are passed intact"
same pwd.out "$work" "the command runs in the caller's cwd, files written there reach the host"
same "$tmpf" from-guest "files written in /tmp appear on the host"
same root.out $'0\nunlimited\ntmpfs\nfd-links' "root, ulimit -l unlimited, /dev/shm is tmpfs, /dev/fd for <(...)"
same nodes.out $'node0\nnode2\nnode1' "--nodes: node0 for the command, node-exec HOST sets the host name"
if [[ -x /usr/bin/mpiexec.mpich ]]; then
    same hydra.out $'node0\nnode1\nnode2' "mpiexec -hosts node0,node1,node2 starts each process on its node"
else
    echo "ok 8 # SKIP /usr/bin/mpiexec.mpich not installed"
fi
