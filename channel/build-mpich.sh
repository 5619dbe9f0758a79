#!/usr/bin/env bash
# build-mpich.sh: build MPICH 4.0.2 as ch3:rdma (this channel injected), or
# untouched as ch3:sock / ch3:nemesis, into a cache outside the repository.
#
#   build-mpich.sh [--source DIR|TARBALL] [--cache DIR] [--jobs N]
#                  [--config-args "..."] [--print-prefix] rdma|sock|nemesis
#
# Layout under the cache (default ${XDG_CACHE_HOME:-~/.cache}/ch3-rdma):
#   src/                      Debian source package downloads
#   4.0.2/pristine-<key>/     the untouched source tree
#   4.0.2/rdma-src-<tree key>/   ch3:rdma's copy of the source
#   4.0.2/<dev>-<key>/{build,prefix}
# The tree key hashes the source identity and the channel's build files;
# <key> adds the configure arguments.  Editing channel C files only
# re-syncs them and runs an incremental make.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
MPICH_VERSION=4.0.2
# 4.0.2 knows only --enable-fortran=all|no: this gives mpif77/mpif90
# (mpif.h, "use mpi") without the slow-to-build mpi_f08 bindings; gfortran
# >= 10 needs -fallow-argument-mismatch for the MPI bindings.  hwloc is
# MPICH's embedded copy in every build: configure would otherwise take the
# system's wherever libhwloc-dev happens to be installed, whose plugins
# (libxml2, X11, ICU...) add about 0.8 MiB to every rank and would make
# builds of the same channel differ by what the host has installed
# (--config-args "--with-hwloc=/usr" picks the system's).
COMMON_ARGS="--with-hwloc=embedded --enable-fortran=all --disable-f08 --disable-doc FFLAGS=-fallow-argument-mismatch FCFLAGS=-fallow-argument-mismatch"

die() { echo "build-mpich: $*" >&2; exit 1; }
log() { echo "build-mpich: $*" >&2; }

source_arg="" cache="${CH3RDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ch3-rdma}"
jobs=$(nproc) extra_args="" print_prefix=no dev=""
while [ $# -gt 0 ]; do
    case "$1" in
        --source) source_arg=$2; shift 2 ;;
        --cache) cache=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --config-args) extra_args=$2; shift 2 ;;
        --print-prefix) print_prefix=yes; shift ;;
        rdma|sock|nemesis) dev=$1; shift ;;
        *) die "unknown argument '$1' (usage: build-mpich.sh [options] rdma|sock|nemesis)" ;;
    esac
done
[ -n "$dev" ] || die "which device? usage: build-mpich.sh [options] rdma|sock|nemesis"

hash_of() { sha256sum | cut -c1-12; }

# Version of an MPICH source tree, from maint/version.m4.
tree_version() {
    sed -n 's/^m4_define(\[MPICH_VERSION_m4\],\[\([^]]*\)\].*/\1/p' "$1/maint/version.m4" 2>/dev/null
}

check_version() {
    local v; v=$(tree_version "$1")
    [ -n "$v" ] || die "$1 is not an MPICH source tree (no maint/version.m4); pass --with-mpich-source=DIR|TARBALL of MPICH $MPICH_VERSION"
    [ "$v" = "$MPICH_VERSION" ] || die "found MPICH $v in $1, but ch3:rdma needs MPICH $MPICH_VERSION; pass --with-mpich-source pointing at mpich-$MPICH_VERSION"
}

# Fetch the Debian source package into $cache/src; print the tarball path.
fetch_debian_source() {
    local d="$cache/src" t
    t=$(ls "$d"/mpich_${MPICH_VERSION}.orig.tar.* 2>/dev/null | head -1 || true)
    if [ -z "$t" ]; then
        mkdir -p "$d"
        if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
            [ "$(id -u)" = 0 ] || die "no deb-src entry for apt; as root add one (see README.md) or pass --with-mpich-source"
            sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
                > /etc/apt/sources.list.d/ch3-rdma-src.sources
            apt-get update -qq
        fi
        log "downloading the Debian mpich source package into $d"
        (cd "$d" && apt-get source --download-only -qq mpich >&2) ||
            die "apt-get source mpich failed (no deb-src entry or no network); pass --with-mpich-source=DIR|TARBALL"
        t=$(ls "$d"/mpich_${MPICH_VERSION}.orig.tar.* 2>/dev/null | head -1 || true)
        [ -n "$t" ] || die "Debian's mpich source is not version $MPICH_VERSION ($(ls "$d")); pass --with-mpich-source"
    fi
    echo "$t"
}

# Resolve the pristine tree; prints its path.
pristine_tree() {
    local s=$source_arg key dir
    [ -n "$s" ] || s=$(fetch_debian_source) || exit 1
    [ -e "$s" ] || die "--with-mpich-source: '$s' does not exist"
    if [ -d "$s" ]; then
        check_version "$s"; echo "$(cd "$s" && pwd)"; return
    fi
    key=$( (basename "$s"; stat -c %s "$s") | hash_of)
    dir="$cache/$MPICH_VERSION/pristine-$key"
    if [ ! -f "$dir/.extracted" ]; then
        rm -rf "$dir"; mkdir -p "$dir"
        log "extracting $s"
        tar xf "$s" -C "$dir" 2>/dev/null || die "cannot extract '$s': not a tar archive"
        local sub; sub=$(ls "$dir" | head -1)
        [ -n "$sub" ] && [ -d "$dir/$sub" ] || die "'$s' holds no source directory"
        mv "$dir/$sub" "$dir/tree.tmp" && mv "$dir/tree.tmp" "$dir/mpich"
        touch "$dir/.extracted"
    fi
    check_version "$dir/mpich"
    echo "$dir/mpich"
}

# Files of this repository that become src/mpid/ch3/channels/rdma.
channel_files() {
    (cd "$top" && {
        ls channel/Makefile.mk channel/subconfigure.m4 channel/errnames.txt
        find channel/include channel/src ringbuf zcopy reg -name '*.[ch]' | sort
    })
}

# Map a repository path to its place in the MPICH tree.
dest_of() {
    case "$1" in
        channel/*) echo "${1#channel/}" ;;
        *) echo "$1" ;;
    esac
}

# Copy changed channel files into the tree (unchanged files keep their
# mtime so make rebuilds only what changed); prints "changed" if any did.
sync_channel() {
    local tree=$1 chdir=$1/src/mpid/ch3/channels/rdma f d changed=no
    while read -r f; do
        d="$chdir/$(dest_of "$f")"
        if ! cmp -s "$top/$f" "$d"; then
            mkdir -p "$(dirname "$d")"; cp "$top/$f" "$d"; changed=yes
        fi
    done < <(channel_files)
    echo "$changed"
}

# Stamp helper: run "$2..." only when the content hash $1 differs from the
# one recorded in stamp file $3.
run_if_changed() {
    local h=$1 stamp=$2; shift 2
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$h" ] && return 1
    "$@"; echo "$h" > "$stamp"
}

regen_tree() {
    local tree=$1
    log "regenerating the MPICH build system for the channel"
    (cd "$tree" && ./maint/gen_subcfg_m4 >/dev/null &&
        autoreconf -if --no-recursive . >/dev/null 2>&1) ||
        die "regeneration (gen_subcfg_m4/autoreconf) failed in $tree"
}

regen_errmsgs() {
    local tree=$1
    (cd "$tree" && maint/extracterrmsgs -skip=src/util/multichannel/mpi.c \
        $(cat maint/errmsgdirs) > .defmsg.tmp 2> .defmsg.err) || true
    if grep -v '^Warning:' "$tree/.defmsg.err" | grep -q .; then
        cat "$tree/.defmsg.err" >&2; die "error keys: see above (each **key defined exactly once)"
    fi
    mv "$tree/.defmsg.tmp" "$tree/src/mpi/errhan/defmsg.h"
}

# maint/configure writes extractcvars with this tree's paths (the shipped
# one points into the release machine's /tmp).
regen_cvars() {
    local tree=$1
    (cd "$tree/maint" && ./configure >/dev/null) &&
        (cd "$tree" && ./maint/extractcvars --dirs="$(cat maint/cvardirs)" >/dev/null) ||
        die "extractcvars failed (check the CVAR YAML blocks in channel/src)"
}

# Hash of the CVAR blocks / error keys of the channel sources.
channel_c() { (cd "$top" && channel_files | grep '\.c$'); }
cvar_hash() { (cd "$top" && channel_c | xargs sed -n \
    '/BEGIN_MPI_T_CVAR_INFO_BLOCK/,/END_MPI_T_CVAR_INFO_BLOCK/p') | hash_of; }
errkey_hash() { (cd "$top" && cat channel/errnames.txt &&
    channel_c | xargs grep -ho '"\*\*[^"]*"' | sort -u) | hash_of; }

# CH3 changes the channel needs (channel/patches/*.patch, each explained
# at its top and in docs/design.md): applied once to the copy.
ch3_patches() { ls "$top"/channel/patches/*.patch 2>/dev/null || true; }
apply_patches() {
    local p
    for p in $(ch3_patches); do
        log "applying $(basename "$p")"
        patch -d "$1" -p1 -N -s < "$p" || die "$p does not apply to MPICH $MPICH_VERSION"
    done
}

prepare_rdma_tree() {
    local tree=$1 pristine=$2 root=$3
    if [ ! -f "$tree/.copied" ]; then
        rm -rf "$tree"; log "copying the MPICH source for ch3:rdma"
        cp -a "$pristine" "$tree"
        echo 'include $(top_srcdir)/src/mpid/ch3/channels/rdma/Makefile.mk' \
            >> "$tree/src/mpid/ch3/channels/Makefile.mk"
        apply_patches "$tree"
        touch "$tree/.copied"
    fi
    sync_channel "$tree" > /dev/null
    run_if_changed "$(cat "$top/channel/Makefile.mk" "$top/channel/subconfigure.m4" | hash_of)" \
        "$tree/.stamp-regen" regen_tree "$tree" && rm -f "$root/build/.configured" || true
    run_if_changed "$(errkey_hash)" "$tree/.stamp-errmsgs" regen_errmsgs "$tree" || true
    run_if_changed "$(cvar_hash)" "$tree/.stamp-cvars" regen_cvars "$tree" || true
}

# Hash of what an installed prefix is built from: the configure arguments
# and, for ch3:rdma, the channel's files as synced into TREE (not the
# repository's: a file edited during a build must not be stamped as built).
build_hash() {
    local args=$1 tree=$2 f
    { echo "$args"
      [ "$dev" != rdma ] || (cd "$top" && channel_files) | while read -r f; do
          cat "$tree/src/mpid/ch3/channels/rdma/$(dest_of "$f")"; done
    } | hash_of
}

build_tree() {
    local tree=$1 root=$2 args=$3 h
    h=$(build_hash "$args" "$tree")
    # Nothing changed since the last install: leave the prefix alone (a
    # reinstall rewrites lib/ under programs that are using it).
    if [ -f "$root/build/.configured" ] && [ -x "$root/prefix/bin/mpichversion" ] &&
        [ "$(cat "$root/.stamp-installed" 2>/dev/null)" = "$h" ]; then
        log "ch3:$dev is up to date in $root/prefix"; return
    fi
    mkdir -p "$root/build"
    if [ ! -f "$root/build/.configured" ]; then
        log "configuring ch3:$dev (log: $root/build/configure.log)"
        (cd "$root/build" && "$tree/configure" --prefix="$root/prefix" $args \
            > configure.log 2>&1) || { tail -25 "$root/build/configure.log" >&2; die "configure failed"; }
        touch "$root/build/.configured"
    fi
    log "building ch3:$dev with $jobs jobs (log: $root/build/make.log)"
    (cd "$root/build" && make -j"$jobs" > make.log 2>&1 && make install >> make.log 2>&1) ||
        { grep -E -B2 -A6 'error|Error' "$root/build/make.log" | tail -40 >&2; die "make failed"; }
    "$root/prefix/bin/mpichversion" | grep -q "ch3:$dev" ||
        die "$root/prefix/bin/mpichversion does not report ch3:$dev"
    echo "$h" > "$root/.stamp-installed"
}

main() {
    local pristine args tkey key root tree
    pristine=$(pristine_tree) || exit 1
    args="--with-device=ch3:$dev $COMMON_ARGS $extra_args"
    tkey=$( { echo "$pristine"; [ "$dev" != rdma ] || cat "$top/channel/Makefile.mk" \
        "$top/channel/subconfigure.m4" $(ch3_patches); } | hash_of)
    key=$(echo "$tkey $args" | hash_of)
    root="$cache/$MPICH_VERSION/$dev-$key"
    if [ "$print_prefix" = yes ]; then echo "$root/prefix"; return; fi
    mkdir -p "$root"
    tree=$pristine
    if [ "$dev" = rdma ]; then
        tree="$cache/$MPICH_VERSION/rdma-src-$tkey"; prepare_rdma_tree "$tree" "$pristine" "$root"
        ln -sfn "$tree" "$root/src"
    fi
    build_tree "$tree" "$root" "$args"
    ln -sfn "$root/prefix" "$cache/$MPICH_VERSION/$dev"
    log "ch3:$dev installed in $root/prefix"
}

main
