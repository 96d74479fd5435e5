#!/usr/bin/env bash
# pack-mpi.sh: collect a relocatable OpenMPI 4.1 runtime (Debian bookworm's
# packages, the libmpi.so.40 our cgo binaries link) from THIS machine into a
# folder that travels to the GPU machine with the device tool's `carry`.
#
#   bench/gpu/pack-mpi.sh [DEST]        # DEST defaults to .gpukit/mpi
#
# It also writes DEST.tgz (the same, gzip'd: ~3.7 MB against ~10 MB): carry
# either. On the GPU machine: `source bench/gpu/env.sh` (it finds the bundle
# at .gpukit/mpi, or at $DML_MPI_BUNDLE, and unpacks .gpukit/mpi.tgz first
# when only that came), then `mpirun -np 2 ./prog`.
#
# Layout of DEST:
#   bin/            orterun (+ mpirun, mpiexec links), orted, ompi_info
#   lib/            libmpi, libopen-rte, libopen-pal and every shared library
#                   they and the kept plugins need (by soname), glibc's own
#                   libraries excepted (the GPU machine's glibc is newer)
#   lib/openmpi/    OpenMPI's MCA plugins (mca_*.so), those whose libraries
#                   are all in lib/ (no UCX, libfabric, PSM, verbs, OpenSHMEM:
#                   single-node runs use btl self,vader)
#   lib/pmix/       PMIx's own plugins
#   lib/hwloc/      empty: hwloc loads no plugins of the GPU machine
#   share/openmpi/  OpenMPI's help texts (error messages need them)
#   share/pmix/     PMIx's help texts
#   etc/            openmpi-mca-params.conf, openmpi-default-hostfile,
#                   pmix-mca-params.conf
set -euo pipefail

DEST=${1:-.gpukit/mpi}
ARCHLIB=/usr/lib/x86_64-linux-gnu
PLUGINS=$ARCHLIB/openmpi/lib/openmpi3
PMIXDIR=$ARCHLIB/pmix2

for f in /usr/bin/orterun /usr/bin/orted "$ARCHLIB/libmpi.so.40" "$PLUGINS/mca_btl_vader.so"; do
	[ -e "$f" ] || { echo "pack-mpi: $f missing: install OpenMPI first (make deps)" >&2; exit 1; }
done

# glibc's own libraries: the GPU machine has its own (newer) glibc.
GLIBC='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libpthread\.so|libdl\.so|librt\.so|libutil\.so|libresolv\.so|libnsl\.so|libanl\.so|libBrokenLocale\.so|libthread_db\.so|libmemusage\.so|libpcprofile\.so)'
# Plugins that need any of these are left out: network fabrics and
# OpenSHMEM, which a single-node `--mca btl self,vader` run never loads.
SKIPDEPS='libucp|libucs|libuct|libucm|libfabric|libpsm|libinfinipath|libibverbs|librdmacm|libefa|liboshmem|libnl-'

rm -rf "$DEST" "$DEST.tgz"
mkdir -p "$DEST"/{bin,lib/openmpi,lib/pmix,lib/hwloc,share,etc}
DEST=$(cd "$DEST" && pwd)

# deps FILE...: "soname path" of every non-glibc library the files need.
deps() {
	ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | grep -Ev "$GLIBC" | sort -u
}

objects=(/usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$ARCHLIB/libmpi.so.40" "$ARCHLIB/libpmix.so.2")
kept=0 skipped=()
for p in "$PLUGINS"/mca_*.so; do
	needs=$(ldd "$p")
	if grep -qE "$SKIPDEPS|not found" <<<"$needs"; then
		skipped+=("$(basename "$p" .so)")
		continue
	fi
	cp "$p" "$DEST/lib/openmpi/"
	objects+=("$p")
	kept=$((kept + 1))
done
for p in "$PMIXDIR"/lib/pmix/*.so; do
	cp "$p" "$DEST/lib/pmix/"
	objects+=("$p")
done

# Libraries, by soname, dereferenced (ldd resolves the whole closure).
deps "${objects[@]}" | while read -r soname path; do
	cp -L "$path" "$DEST/lib/$soname"
done
cp -L "$ARCHLIB/libpmix.so.2" "$DEST/lib/libpmix.so.2"
# Never carry what the skip list names, even when a kept object pulls it in.
for f in "$DEST"/lib/*.so*; do
	if basename "$f" | grep -qE "$SKIPDEPS"; then
		echo "pack-mpi: a kept object needs $(basename "$f"); not expected" >&2
		exit 1
	fi
done

cp -L /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$DEST/bin/"
ln -s orterun "$DEST/bin/mpirun"
ln -s orterun "$DEST/bin/mpiexec"

cp -r /usr/share/openmpi "$DEST/share/openmpi"
cp -r "$PMIXDIR/share/pmix" "$DEST/share/pmix"
cp /etc/openmpi/openmpi-mca-params.conf /etc/openmpi/openmpi-default-hostfile "$DEST/etc/"
cp "$PMIXDIR/share/pmix-mca-params.conf" "$DEST/etc/" 2>/dev/null || true

# Every object in the bundle must resolve against the bundle alone (plus glibc).
missing=$(LD_LIBRARY_PATH="$DEST/lib" ldd "$DEST"/bin/* "$DEST"/lib/*.so* "$DEST"/lib/openmpi/*.so "$DEST"/lib/pmix/*.so 2>/dev/null |
	awk '$2 == "=>" && ($3 == "not" || $3 !~ /^\//) {print $1}' | sort -u)
if [ -n "$missing" ]; then
	echo "pack-mpi: unresolved libraries: $missing" >&2
	exit 1
fi
outside=$(LD_LIBRARY_PATH="$DEST/lib" ldd "$DEST"/bin/orterun "$DEST"/lib/*.so* "$DEST"/lib/openmpi/*.so "$DEST"/lib/pmix/*.so 2>/dev/null |
	awk '$2 == "=>" {print $1, $3}' | grep -Ev "$GLIBC" | grep -v " $DEST/lib/" | sort -u || true)
if [ -n "$outside" ]; then
	echo "pack-mpi: libraries resolved outside the bundle: $outside" >&2
	exit 1
fi

{
	echo "OpenMPI runtime bundle, packed $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
	dpkg-query -W -f '${Package} ${Version}\n' libopenmpi3 openmpi-bin libpmix2 libhwloc15 2>/dev/null || true
	echo "plugins kept: $kept; left out: ${skipped[*]}"
} >"$DEST/MANIFEST"
# The same as one gzip'd tarball beside it (a quarter of the size), which
# env.sh unpacks when the folder itself was not carried.
tar czf "$DEST.tgz" -C "$(dirname "$DEST")" "$(basename "$DEST")"
echo "pack-mpi: $(du -sb "$DEST" | cut -f1) bytes in $DEST, $(du -sb "$DEST.tgz" | cut -f1) in $DEST.tgz ($kept OpenMPI plugins; left out ${#skipped[@]}: ${skipped[*]})"
