#!/usr/bin/env bash
# Bad configure input stops with a one-line message that says what to do;
# the committed build files run every test script there is.
. "$(dirname "$0")/lib.sh"
plan 6
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# A private copy: autoconf refuses a VPATH configure of a configured tree.
mkdir -p "$W/src/ringbuf" && cp -r "$TOP/configure" "$TOP/Makefile.in" "$TOP/build-aux" "$W/src/" &&
    cp "$TOP/ringbuf/rb_pipe.h" "$W/src/ringbuf/"
EXPECT_TIMEOUT=120
expect_output 1 'nonexistent/mpich does not exist; give an MPICH 4.0.2' "missing --with-mpich-source" -- \
    env -C "$W/src" ./configure --with-mpich-source=/nonexistent/mpich
mkdir -p "$W/mpich-4.1.0/maint"
echo 'm4_define([MPICH_VERSION_m4],[4.1.0])dnl' > "$W/mpich-4.1.0/maint/version.m4"
expect_output 1 'found MPICH 4.1.0 .*needs MPICH 4.0.2' "MPICH other than 4.0.2 (directory)" -- \
    env -C "$W/src" ./configure --with-mpich-source="$W/mpich-4.1.0"
tar -C "$W" -czf "$W/mpich-4.1.0.tar.gz" mpich-4.1.0
expect_output 1 'found MPICH 4.1.0 .*needs MPICH 4.0.2' "MPICH other than 4.0.2 (tarball)" -- \
    env -C "$W/src" ./configure --with-mpich-source="$W/mpich-4.1.0.tar.gz"
mkdir -p "$W/empty"
expect_output 1 'is not an MPICH source tree' "a directory that is not MPICH" -- \
    env -C "$W/src" ./configure --with-mpich-source="$W/empty"
# every t-*.t under test/ is in TESTS, and Makefile.in is automake's output of Makefile.am
missing=$(cd "$TOP" && for t in $(find test -name 't-*.t' | sort); do
    grep -qE "(^|[[:space:]])$t([[:space:]]|\\\\|$)" Makefile.am || echo "$t"; done)
[ -z "$missing" ]; ok $? "every test script is in Makefile.am's TESTS${missing:+ (missing: $(echo $missing))}"
missing=$(cd "$TOP" && sed -n '/^TESTS = /,/[^\\]$/p' Makefile.am | grep -oE 'test/[^ \\]+\.t' |
    while read -r t; do grep -qF "$t" Makefile.in || echo "$t"; done)
[ -z "$missing" ]; ok $? "Makefile.in is regenerated from Makefile.am (run automake)${missing:+: missing $(echo $missing)}"
done_testing
