#!/usr/bin/env bash
# `make deb`: build redcar's Debian package, target/debian/redcar_<version>_<arch>.deb
# (docs/packaging.md says what it installs). tests/it/deb.rs builds it through this script too,
# with `--binary` (the debug binary, `cargo test` has just built it) and `--out` (a temp dir).
#
#   scripts/build-deb.sh [--binary PATH] [--out DIR] [--compression xz|gzip] [--no-lintian]
#
# The tool: dpkg-deb, not cargo-deb. Measured on this project's machine (2 cores, shared with
# other builds): `cargo install cargo-deb` (3.8.0) took 4 min 10 s wall, 108 s of CPU, and left
# 148 MB of build output; on a fresh machine, and so on every new CI machine, that cost comes
# again. dpkg-deb is part of dpkg, on every Debian and Ubuntu system, with nothing to install.
# And cargo-deb would save little here: the man pages need their own step (examples/manpage.rs)
# either way, and the unit and maintainer-script choices (installed, not enabled: the service
# needs the operator's cluster address first) are ours to make, not a tool's defaults. So this
# script lays out the tree itself, computes Depends with dpkg-shlibdeps (dpkg-dev) when it is
# there and from `objdump -p` when not, and builds with `dpkg-deb --root-owner-group`.
#
# The version is Cargo.toml's plus a Debian revision: packaging/debian/changelog's top entry
# must be `redcar (<Cargo version>-<revision>)`, so a version bump without a changelog entry
# stops here. The entry's date is the man pages' date and SOURCE_DATE_EPOCH (file times in the
# package), so two builds from the same sources differ only where the binary itself does.
set -euo pipefail

cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PKG=packaging/debian

die() {
    echo "build-deb: $*" >&2
    exit 1
}

usage() {
    echo "usage: scripts/build-deb.sh [--binary PATH] [--out DIR] [--compression xz|gzip] [--no-lintian]"
    echo "  --binary PATH  package this redcar binary instead of building the release one"
    echo "  --out DIR      where the .deb goes (default $TARGET_DIR/debian)"
    echo "  --compression  dpkg-deb's compressor (default xz; gzip is 4x cheaper in CPU, 50 % larger)"
    echo "  --no-lintian   do not run lintian even if it is installed"
}

binary="" out="$TARGET_DIR/debian" compression=xz lintian=1
while [[ $# -gt 0 ]]; do
    case $1 in
        --binary) binary=${2:?--binary needs a path}; shift 2 ;;
        --out) out=${2:?--out needs a directory}; shift 2 ;;
        --compression) compression=${2:?--compression needs xz or gzip}; shift 2 ;;
        --no-lintian) lintian=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 64 ;;
    esac
done

command -v dpkg-deb >/dev/null || die "dpkg-deb not found: the package is built on Debian or Ubuntu (dpkg)"
command -v strip >/dev/null || die "strip not found: apt-get install binutils"
arch=$(dpkg --print-architecture)

# The [package] version; a prerelease (1.0.0-rc.1) sorts before its release in Debian as 1.0.0~rc.1.
version=$(awk -F'"' '/^\[/ { pkg = ($0 == "[package]") } pkg && /^version *=/ { print $2; exit }' Cargo.toml)
[[ -n $version ]] || die "no version in Cargo.toml's [package]"
upstream=${version/-/\~}
deb_version=$(sed -n '1s/^redcar (\([^)]*\)).*/\1/p' "$PKG/changelog")
[[ ${deb_version%-*} == "$upstream" && $deb_version == *-* ]] ||
    die "$PKG/changelog's top entry is '${deb_version:-?}', Cargo.toml's version is $version: add an entry 'redcar ($upstream-1)'"
trailer=$(sed -n '/^ -- /{p;q}' "$PKG/changelog")
# " -- Name <email>  Date" (two spaces before the date, as Debian's changelog format has it)
maintainer=${trailer#' -- '}
maintainer=${maintainer%%>  *}'>'
epoch=$(date -u -d "${trailer##*>  }" +%s) || die "bad date in $PKG/changelog: $trailer"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$epoch}
man_date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)

# The binary and the man-page generator. The generator is an example so the product binary does
# not carry clap_mangen (the price: an example builds the dev-dependencies too, once, in the
# same profile); with --binary it is built in the dev profile, which `cargo test` has already
# built the library for.
if [[ -z $binary ]]; then
    "$CARGO" build --release --bin redcar --example manpage
    binary=$TARGET_DIR/release/redcar
    manpage=$TARGET_DIR/release/examples/manpage
else
    [[ -x $binary ]] || die "--binary $binary is not an executable"
    "$CARGO" build --example manpage
    manpage=$TARGET_DIR/debug/examples/manpage
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/redcar-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
# debian/redcar is where dpkg-shlibdeps expects a package's files (no warnings that way).
root=$work/debian/redcar
install -d -m 755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/man/man1" \
    "$root/lib/systemd/system" "$root/usr/lib/sysusers.d" "$root/etc/redcar" \
    "$root/usr/share/doc/redcar"

# Stripped as dh_strip does: the release profile keeps line tables (debug = 1) for profiling,
# which is most of its size and of no use to a packaged service.
install -m 755 "$binary" "$root/usr/bin/redcar"
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/redcar"

"$manpage" "$work/man" "$man_date"
[[ -s $work/man/redcar.1 ]] || die "the man-page generator wrote no redcar.1"
for page in "$work"/man/*.1; do
    gzip -9n -c "$page" >"$root/usr/share/man/man1/${page##*/}.gz"
done

# examples/redcar.yaml is the packaged default (tests/it/deploy.rs checks it as an example too):
# loopback listener and socket, and seeds the operator replaces.
install -m 644 examples/redcar.yaml "$root/etc/redcar/redcar.yaml"
install -m 644 "$PKG/redcar.service" "$root/lib/systemd/system/redcar.service"
install -m 644 "$PKG/redcar.sysusers" "$root/usr/lib/sysusers.d/redcar.conf"
install -m 644 "$PKG/copyright" "$root/usr/share/doc/redcar/copyright"
gzip -9n <"$PKG/changelog" >"$root/usr/share/doc/redcar/changelog.Debian.gz"
gzip -9n <docs/configuration.md >"$root/usr/share/doc/redcar/configuration.md.gz"
install -m 755 "$PKG/postinst" "$PKG/prerm" "$PKG/postrm" "$root/DEBIAN/"
# A conffile: dpkg keeps the operator's edits on upgrade and asks before replacing them.
echo /etc/redcar/redcar.yaml >"$root/DEBIAN/conffiles"

# Depends from the binary's shared libraries.
if command -v dpkg-shlibdeps >/dev/null; then
    printf 'Source: redcar\n\nPackage: redcar\nArchitecture: any\n' >"$work/debian/control"
    depends=$(cd "$work" && dpkg-shlibdeps -O debian/redcar/usr/bin/redcar | sed -n 's/^shlibs:Depends=//p')
else
    # No dpkg-dev: the glibc and libgcc versions the binary references, as dpkg-shlibdeps
    # would compute them for these two; any other library stops the build rather than
    # shipping a Depends that misses it.
    command -v objdump >/dev/null || die "neither dpkg-shlibdeps (dpkg-dev) nor objdump (binutils) found"
    dynamic=$(objdump -p "$root/usr/bin/redcar")
    glibc=$(grep -o 'GLIBC_[0-9.]*' <<<"$dynamic" | sed 's/GLIBC_//' | sort -V | tail -1)
    depends="libc6 (>= $glibc)"
    while read -r lib; do
        case $lib in
            libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
            libgcc_s.so.1)
                gcc=$(grep -o 'GCC_[0-9.]*' <<<"$dynamic" | sed 's/GCC_//' | sort -V | tail -1)
                depends+=", libgcc-s1 (>= ${gcc%.0})"
                ;;
            *) die "the binary needs $lib: install dpkg-dev so dpkg-shlibdeps names its package" ;;
        esac
    done < <(awk '$1 == "NEEDED" { print $2 }' <<<"$dynamic")
fi
[[ $depends == *libc6* ]] || die "no libc6 in the computed Depends '$depends'"

# md5sums as dh_md5sums writes them: every file but the conffiles (dpkg tracks those itself).
(cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' |
    LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"

cat >"$root/DEBIAN/control" <<EOF
Package: redcar
Version: $deb_version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends
Recommends: redis-tools
Section: net
Priority: optional
Description: Redis Cluster sidecar proxy
 redcar gives applications one local Redis endpoint, TCP or a Unix socket, in
 front of a whole Redis Cluster. It keeps the slot map and a few persistent,
 pipelined connections to every node, follows MOVED and ASK redirects,
 failovers and resharding, and splits multi-key commands across slots, so
 clients need no cluster mode and web workers that cannot keep connections
 between requests (PHP above all) stop paying for a cluster on every request.
 .
 The systemd unit is installed but not enabled: set the cluster's nodes in
 /etc/redcar/redcar.yaml, then run "systemctl enable --now redcar".
EOF

# File times from the changelog entry, not from this build.
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb=$out/redcar_${deb_version}_${arch}.deb
dpkg-deb --root-owner-group -Z"$compression" --build "$root" "$deb" >/dev/null

if [[ $lintian == 1 ]]; then
    if command -v lintian >/dev/null; then
        # Reported, not fatal: the tags depend on the lintian version installed.
        lintian --info "$deb" || echo "build-deb: lintian reported the tags above" >&2
    else
        echo "build-deb: lintian not installed, not run" >&2
    fi
fi
echo "$deb"
