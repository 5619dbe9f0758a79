#!/bin/bash
# TAP: run-vm must report guest failures as failures: a non-zero exit, a hang past --timeout,
# a guest that powers off or panics under the command, and a qemu killed from outside.
# Usage: prove test/softroce/t-runner-failures.t   (forces VM mode; ~2 minutes under TCG)
set -euo pipefail
. "$(dirname "$0")/common.sh"
run_vm=$SOFTROCE_DIR/run-vm
tmp=$(mktemp -d /tmp/softroce-failures.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# vm NAME ARGS...: run-vm --vm ARGS, stdout/stderr/status in $tmp/NAME.{out,err,rc}.
# A guest that timed out before its command printed anything never reached the command
# (a boot that hung under TCG; seen once in ten CI runs, in the poweroff case): that is
# not what these cases test, so it runs once more, saying so.
vm() {
    local name=$1 rc=0 try
    shift
    for try in 1 2; do
        rc=0
        "$run_vm" --vm "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
        ((rc == 124)) && [[ ! -s $tmp/$name.out ]] || break
        echo "# $name: the guest timed out before the command printed anything (try $try)"
    done
    echo "$rc" >"$tmp/$name.rc"
}
# expect NAME RC "STDOUT_WORD..." STDERR_TEXT DESCRIPTION
expect() {
    local rc ok=0 word
    rc=$(<"$tmp/$1.rc")
    [[ $rc == "$2" ]] || ok=1
    for word in $3; do grep -qF -- "$word" "$tmp/$1.out" || ok=1; done
    [[ -z $4 ]] || grep -qF -- "$4" "$tmp/$1.err" || ok=1
    tap $ok "$5"
    if ((ok)); then
        echo "# exit status $rc (want $2); stdout:"; diag "$tmp/$1.out"; echo "# stderr:"; diag "$tmp/$1.err"
    fi
}
# PIDs of the descendants of $1 (the process tree under run-vm).
descendants() {
    local c
    for c in $(ps -o pid= --ppid "$1"); do echo "$c"; descendants "$c"; done
}

echo "1..5"

vm exit --timeout 300 -- sh -c 'echo out-marker; echo err-marker >&2; exit 7'
expect exit 7 "out-marker err-marker" "" "a command exiting 7 makes run-vm exit 7 with its stdout and stderr"

start=$(date +%s)
vm hang --timeout 30 -- sh -c 'echo before-hang; exec sleep 1000'
echo "# hang run took $(($(date +%s) - start)) s"
expect hang 124 before-hang "run-vm: guest timed out after 30 s" "a hung command is a timeout failure"

vm poweroff --timeout 300 -- sh -c 'echo before-poweroff; echo o >/proc/sysrq-trigger; sleep 100'
expect poweroff 125 before-poweroff "run-vm: guest died" "a guest powered off under the command is a failure"

vm panic --timeout 300 -- sh -c 'echo before-panic; echo c >/proc/sysrq-trigger; sleep 100'
expect panic 125 before-panic "Kernel panic" "a guest kernel panic is a failure with the console"

# Kill qemu from outside once the command has started (it touches a file in the shared /tmp).
vm killed --timeout 300 -- sh -c "echo before-kill; touch $tmp/started; exec sleep 1000" &
bg=$!
for ((i = 0; i < 300; i++)); do [[ -e $tmp/started ]] && break; sleep 1; done
for p in $(descendants "$bg"); do
    [[ $(ps -o comm= -p "$p") == qemu-system-x86* ]] && kill -KILL "$p"
done
wait "$bg"
expect killed 125 before-kill "run-vm: guest died" "a qemu killed from outside is a failure"
