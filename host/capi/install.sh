#!/bin/sh
# Installs the C library of naaice-rs under PREFIX:
#   PREFIX/include/naaice.h, PREFIX/include/naaice_ap2.h (which includes naaice.h)
#   PREFIX/lib/libnaaice_ap2.so, PREFIX/lib/libnaaice_ap2.a
#   PREFIX/lib/pkgconfig/naaice.pc
# so that `cc app.c $(pkg-config --cflags --libs naaice)` works with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (not needed for /usr or /usr/local).
#
# Usage: host/capi/install.sh PREFIX
#
# Builds the library with `cargo build --release -p naaice-capi` first, unless NAAICE_LIB_DIR
# names a folder that already holds libnaaice_ap2.so and libnaaice_ap2.a (for example a
# debug build's target/debug).
set -eu

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
manifest="$here/Cargo.toml"
mkdir -p "$1"
prefix=$(cd "$1" && pwd)

# The verbs transport (NAAICE_TRANSPORT=verbs, the run-time default) is built in when the
# rdma-core development files are present (Debian: pkg-config libibverbs-dev librdmacm-dev
# libclang-dev); NAAICE_VERBS=no leaves it out, NAAICE_VERBS=yes insists on it.
verbs=${NAAICE_VERBS:-auto}
if [ "$verbs" = auto ]; then
    if pkg-config --exists libibverbs librdmacm 2>/dev/null; then verbs=yes; else verbs=no; fi
fi
features=""
[ "$verbs" = yes ] && features="--features verbs"

if [ -z "${NAAICE_LIB_DIR:-}" ]; then
    # shellcheck disable=SC2086
    cargo build --release --locked -p naaice-capi $features --manifest-path "$manifest"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$manifest" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    NAAICE_LIB_DIR="$target/release"
fi
for lib in libnaaice_ap2.so libnaaice_ap2.a; do
    if [ ! -f "$NAAICE_LIB_DIR/$lib" ]; then
        echo "$0: $NAAICE_LIB_DIR/$lib not found" >&2
        exit 1
    fi
done

pkgid=$(cargo pkgid --manifest-path "$manifest" -p naaice-capi)
version=${pkgid##*[@#]}
# What a static link needs besides the library (rustc --print native-static-libs).
private_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
[ "$verbs" = yes ] && private_libs="-lrdmacm -libverbs $private_libs"

install -d "$prefix/include" "$prefix/lib/pkgconfig"
install -m 644 "$here/include/naaice.h" "$prefix/include/naaice.h"
install -m 644 "$here/include/naaice_ap2.h" "$prefix/include/naaice_ap2.h"
install -m 755 "$NAAICE_LIB_DIR/libnaaice_ap2.so" "$prefix/lib/libnaaice_ap2.so"
install -m 644 "$NAAICE_LIB_DIR/libnaaice_ap2.a" "$prefix/lib/libnaaice_ap2.a"
sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" -e "s|@PRIVATE_LIBS@|$private_libs|g" \
    "$here/naaice.pc.in" >"$prefix/lib/pkgconfig/naaice.pc"
echo "installed naaice $version under $prefix"
