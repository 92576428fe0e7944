#!/bin/sh
# Installs the C library and the programs of naaice-rs under PREFIX:
#   PREFIX/include/naaice.h, PREFIX/include/naaice_ap2.h (which includes naaice.h),
#     PREFIX/include/naaice_ap2_cpp.h (C++20 NAAHandler, header-only, includes naaice_ap2.h)
#   PREFIX/lib/libnaaice_ap2.so.VERSION (SONAME libnaaice_ap2.so.MAJOR), the symlinks
#     libnaaice_ap2.so.MAJOR -> libnaaice_ap2.so.VERSION and libnaaice_ap2.so -> .so.MAJOR,
#     PREFIX/lib/libnaaice_ap2.a
#   PREFIX/lib/pkgconfig/naaice.pc
#   PREFIX/lib/cmake/naaice/naaiceConfig.cmake, naaiceConfigVersion.cmake, naaiceTargets.cmake
#     (find_package(naaice): targets naaice::naaice, naaice::naaice_static, and the
#     reference's names naaice::low_level, naaice::middleware, naaice::swnaa; relocatable)
#   PREFIX/bin/naaice-swnaa (the software NAA server), PREFIX/bin/naaice-bench (the benchmark)
#   PREFIX/share/man/man1/naaice-swnaa.1, naaice-bench.1
# so that `cc app.c $(pkg-config --cflags --libs naaice)` works with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, and CMake projects find the package with
# -DCMAKE_PREFIX_PATH=PREFIX (neither is needed for /usr or /usr/local).
#
# Usage: host/capi/install.sh PREFIX
#
# Builds everything with `cargo build --profile dist` first (release code, stripped; the
# profile is in the workspace's Cargo.toml), unless NAAICE_LIB_DIR names a folder that already
# holds libnaaice_ap2.so and libnaaice_ap2.a (for example a debug build's target/debug); the
# programs then come from NAAICE_BIN_DIR (default: NAAICE_LIB_DIR).
set -eu

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
manifest="$here/Cargo.toml"
mkdir -p "$1"
prefix=$(cd "$1" && pwd)

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
        $features --manifest-path "$manifest"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$manifest" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    NAAICE_LIB_DIR="$target/dist"
fi
bin_dir=${NAAICE_BIN_DIR:-$NAAICE_LIB_DIR}
for file in "$NAAICE_LIB_DIR/libnaaice_ap2.so" "$NAAICE_LIB_DIR/libnaaice_ap2.a" \
    "$bin_dir/naaice-swnaa" "$bin_dir/naaice-bench"; do
    if [ ! -f "$file" ]; then
        echo "$0: $file not found (cargo build -p naaice-capi -p naaice-swnaa -p naaice-bench)" >&2
        exit 1
    fi
done

pkgid=$(cargo pkgid --manifest-path "$manifest" -p naaice-capi)
version=${pkgid##*[@#]}
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
# What a static link needs besides the library (rustc --print native-static-libs).
# (With verbs, the library carries rdma-core's loader stubs: only -ldl, listed, is needed.)
private_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
# The same as a CMake list of library names (gcc_s;util;...).
# shellcheck disable=SC2086
native_libs=$(printf '%s\n' $private_libs | sed 's/^-l//' | paste -sd ';' -)

lib="$prefix/lib"
man="$prefix/share/man/man1"
cmake_dir="$lib/cmake/naaice"
install -d "$prefix/include" "$lib/pkgconfig" "$cmake_dir" "$prefix/bin" "$man"
for header in naaice.h naaice_ap2.h naaice_ap2_cpp.h; do
    install -m 644 "$here/include/$header" "$prefix/include/$header"
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
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" -e "s|@PRIVATE_LIBS@|$private_libs|g" \
    "$here/naaice.pc.in" >"$lib/pkgconfig/naaice.pc"
# The CMake package; its files find the prefix from their own folder (no @PREFIX@).
sizeof_void_p=$(($(getconf LONG_BIT) / 8))
for file in naaiceConfig naaiceConfigVersion naaiceTargets; do
    sed -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" \
        -e "s|@NATIVE_LIBS@|$native_libs|g" -e "s|@SIZEOF_VOID_P@|$sizeof_void_p|g" \
        "$here/cmake/$file.cmake.in" >"$cmake_dir/$file.cmake"
done
for program in naaice-swnaa naaice-bench; do
    install -m 755 "$bin_dir/$program" "$prefix/bin/$program"
    "$prefix/bin/$program" --man-page >"$man/$program.1"
done
echo "installed naaice $version under $prefix"
