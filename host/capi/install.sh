#!/bin/sh
# Installs (or removes) the C library and the programs of naaice-rs:
#   PREFIX/include/naaice.h, naaice_ap2.h (includes naaice.h), naaice_ap2_cpp.h (C++20
#     NAAHandler, header-only, includes naaice_ap2.h), naaice.f90 (the Fortran module
#     naaice: ISO_C_BINDING interfaces of naaice_ap2.h, compiled with the program)
#   LIBDIR/libnaaice_ap2.so.VERSION (SONAME libnaaice_ap2.so.MAJOR), the symlinks
#     libnaaice_ap2.so.MAJOR -> libnaaice_ap2.so.VERSION and libnaaice_ap2.so -> .so.MAJOR,
#     LIBDIR/libnaaice_ap2.a
#   LIBDIR/pkgconfig/naaice.pc
#   LIBDIR/cmake/naaice/naaiceConfig.cmake, naaiceConfigVersion.cmake, naaiceTargets.cmake
#     (find_package(naaice): targets naaice::naaice, naaice::naaice_static, and the
#     reference's names naaice::low_level, naaice::middleware, naaice::swnaa; relocatable)
#   PREFIX/bin/naaice-swnaa (the software NAA server), naaice-bench (the benchmark),
#     naaice-info (set-up check and NAA probe), naaice-spec (NAA_SPEC for Slurm jobs)
#   MANDIR/man1/naaice-swnaa.1, naaice-bench.1, naaice-info.1; MANDIR/man7/naaice.7;
#     MANDIR/man3/FUNCTION.3 for every function of the C headers (naa_create(3), ...)
# so that `cc app.c $(pkg-config --cflags --libs naaice)` (Fortran:
# `gfortran $(pkg-config --variable=fortran_module naaice) app.f90 $(pkg-config --libs naaice)`)
# works with
# PKG_CONFIG_PATH=LIBDIR/pkgconfig, and CMake projects find the package with
# -DCMAKE_PREFIX_PATH=PREFIX (neither is needed for /usr or /usr/local).
#
# Usage: host/capi/install.sh PREFIX               install
#        host/capi/install.sh --uninstall PREFIX   remove what install put there
#
# Environment:
#   DESTDIR   staging root for packages: files go to DESTDIR/PREFIX/..., while the paths
#             written into naaice.pc (and the programs' expectations) stay PREFIX/...
#   LIBDIR    library folder (absolute; default PREFIX/lib), e.g. /usr/lib/x86_64-linux-gnu
#   MANDIR    man page folder (absolute; default PREFIX/share/man)
#   NAAICE_VERBS=no   leave the verbs transport out (default yes)
#   NAAICE_LIB_DIR    a folder that already holds libnaaice_ap2.so and .a (for example a
#                     debug build's target/debug): install that instead of building
#   NAAICE_BIN_DIR    where the programs are then (default NAAICE_LIB_DIR)
#
# Without NAAICE_LIB_DIR it builds everything with `cargo build --profile dist` first
# (release code, stripped; the profile is in the workspace's Cargo.toml).
set -eu

uninstall=no
if [ "${1:-}" = --uninstall ]; then
    uninstall=yes
    shift
fi
if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 [--uninstall] PREFIX" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
manifest="$here/Cargo.toml"
repo=$(cd "$here/../.." && pwd)
case "$1" in
    /*) prefix=$1 ;;
    *) prefix="$PWD/$1" ;;
esac
prefix=${prefix%/}
libdir=${LIBDIR:-$prefix/lib}
mandir=${MANDIR:-$prefix/share/man}
for dir in "$libdir" "$mandir"; do
    case "$dir" in
        /*) ;;
        *) echo "install.sh: LIBDIR and MANDIR must be absolute paths" >&2; exit 2 ;;
    esac
done
destdir=${DESTDIR:-}
programs="naaice-swnaa naaice-bench naaice-info"

pkgid=$(cargo pkgid --manifest-path "$manifest" -p naaice-capi)
version=${pkgid##*[@#]}
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}

# Every file install puts down (relative to DESTDIR), for --uninstall.
installed_files() {
    for header in naaice.h naaice_ap2.h naaice_ap2_cpp.h naaice.f90; do echo "$prefix/include/$header"; done
    for lib in "libnaaice_ap2.so.$version" "libnaaice_ap2.so.$major" libnaaice_ap2.so \
        libnaaice_ap2.a pkgconfig/naaice.pc cmake/naaice/naaiceConfig.cmake \
        cmake/naaice/naaiceConfigVersion.cmake cmake/naaice/naaiceTargets.cmake; do
        echo "$libdir/$lib"
    done
    for program in $programs naaice-spec; do echo "$prefix/bin/$program"; done
    for program in $programs; do echo "$mandir/man1/$program.1"; done
    echo "$mandir/man7/naaice.7"
    for page in "$repo"/docs/man/man3/*.3; do echo "$mandir/man3/${page##*/}"; done
}

if [ "$uninstall" = yes ]; then
    removed=0
    for file in $(installed_files); do
        if [ -e "$destdir$file" ] || [ -L "$destdir$file" ]; then
            rm -f "$destdir$file"
            removed=$((removed + 1))
        fi
    done
    # Folders of ours that are now empty (never PREFIX's own bin, lib, include, ...).
    rmdir "$destdir$libdir/cmake/naaice" 2>/dev/null || true
    echo "removed $removed files of naaice $version from $destdir$prefix"
    exit 0
fi

# The verbs transport (used by NAAICE_TRANSPORT=auto, the run-time default, and =verbs) is built in:
# rdma-core is loaded at run time (a machine without it gets a clear error from naa_create),
# so building needs no rdma-core. NAAICE_VERBS=no leaves it out.
features=""
case "${NAAICE_VERBS:-yes}" in
    no) features="--no-default-features" ;;
    yes | auto) ;;
    *)
        echo "install.sh: NAAICE_VERBS is yes or no" >&2
        exit 2
        ;;
esac

if [ -z "${NAAICE_LIB_DIR:-}" ]; then
    # shellcheck disable=SC2086
    cargo build --profile dist --locked -p naaice-capi -p naaice-swnaa -p naaice-bench \
        -p naaice-info $features --manifest-path "$manifest"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$manifest" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    NAAICE_LIB_DIR="$target/dist"
fi
bin_dir=${NAAICE_BIN_DIR:-$NAAICE_LIB_DIR}
for file in "$NAAICE_LIB_DIR/libnaaice_ap2.so" "$NAAICE_LIB_DIR/libnaaice_ap2.a"; do
    if [ ! -f "$file" ]; then
        echo "$0: $file not found (cargo build -p naaice-capi)" >&2
        exit 1
    fi
done
for program in $programs; do
    if [ ! -f "$bin_dir/$program" ]; then
        echo "$0: $bin_dir/$program not found (cargo build -p $program)" >&2
        exit 1
    fi
done
# What a static link needs besides the library (rustc --print native-static-libs).
# (With verbs, the library carries rdma-core's loader stubs: only -ldl, listed, is needed.)
private_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
# The same as a CMake list of library names (gcc_s;util;...).
# shellcheck disable=SC2086
native_libs=$(printf '%s\n' $private_libs | sed 's/^-l//' | paste -sd ';' -)

inc="$destdir$prefix/include"
lib="$destdir$libdir"
bin="$destdir$prefix/bin"
cmake_dir="$lib/cmake/naaice"
install -d "$inc" "$lib/pkgconfig" "$cmake_dir" "$bin" "$destdir$mandir/man1" "$destdir$mandir/man3" \
    "$destdir$mandir/man7"
for header in naaice.h naaice_ap2.h naaice_ap2_cpp.h naaice.f90; do
    install -m 644 "$here/include/$header" "$inc/$header"
done
# The shared library under its full version, found through its SONAME (.so.MAJOR: the
# dynamic loader) and the plain name (.so: the linker's -lnaaice_ap2).
rm -f "$lib/libnaaice_ap2.so" "$lib/libnaaice_ap2.so.$major"
install -m 755 "$NAAICE_LIB_DIR/libnaaice_ap2.so" "$lib/libnaaice_ap2.so.$version"
ln -s "libnaaice_ap2.so.$version" "$lib/libnaaice_ap2.so.$major"
ln -s "libnaaice_ap2.so.$major" "$lib/libnaaice_ap2.so"
install -m 644 "$NAAICE_LIB_DIR/libnaaice_ap2.a" "$lib/libnaaice_ap2.a"
# The archive keeps the debug info of the standard library's objects whatever the profile
# says: strip it (the symbols stay, static links need them).
if command -v strip >/dev/null; then strip --strip-debug "$lib/libnaaice_ap2.a"; fi
# naaice.pc names the final paths (PREFIX, LIBDIR), not the staging root.
sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@VERSION@|$version|g" \
    -e "s|@PRIVATE_LIBS@|$private_libs|g" "$here/naaice.pc.in" >"$lib/pkgconfig/naaice.pc"
# The CMake package; its files find the prefix from their own folder (no @PREFIX@). With a
# LIBDIR outside PREFIX/lib, they are told where the headers are.
sizeof_void_p=$(($(getconf LONG_BIT) / 8))
case "$libdir" in
    "$prefix/lib") include_dir='${_naaice_prefix}/include' ;;
    *) include_dir="$prefix/include" ;;
esac
for file in naaiceConfig naaiceConfigVersion naaiceTargets; do
    sed -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" \
        -e "s|@NATIVE_LIBS@|$native_libs|g" -e "s|@SIZEOF_VOID_P@|$sizeof_void_p|g" \
        -e "s|@INCLUDE_DIR@|$include_dir|g" \
        "$here/cmake/$file.cmake.in" >"$cmake_dir/$file.cmake"
done
for program in $programs; do
    install -m 755 "$bin_dir/$program" "$bin/$program"
    "$bin_dir/$program" --man-page >"$destdir$mandir/man1/$program.1"
done
install -m 755 "$repo/slurm/naaice-spec" "$bin/naaice-spec"
install -m 644 "$repo/docs/man/naaice.7" "$destdir$mandir/man7/naaice.7"
install -m 644 "$repo"/docs/man/man3/*.3 "$destdir$mandir/man3/"
echo "installed naaice $version under $destdir$prefix"
