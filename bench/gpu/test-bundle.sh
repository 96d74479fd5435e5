#!/usr/bin/env bash
# test-bundle.sh: run a command with ONLY the packed OpenMPI bundle, as on the
# GPU machine: in a private mount namespace, the system's OpenMPI, PMIx and
# their libraries are hidden (empty folders and /dev/null bound over them),
# then bench/gpu/env.sh is sourced and the command runs. Needs root.
#
#   bench/gpu/test-bundle.sh mpirun -np 2 /tmp/mpi.test -test.run TestConformance
set -euo pipefail
if [ "${_DML_MASKED:-}" != 1 ]; then
	exec unshare -m env _DML_MASKED=1 "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
bundle=${DML_MPI_BUNDLE:-$here/../../.gpukit/mpi}
mount --make-rprivate /
empty=$(mktemp -d)
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/hwloc /etc/openmpi /usr/share/openmpi; do
	[ -d "$d" ] && mount --bind "$empty" "$d"
done
for so in "$bundle"/lib/*.so*; do
	sys=/usr/lib/x86_64-linux-gnu/$(basename "$so")
	[ -e "$sys" ] && mount --bind /dev/null "$(readlink -f "$sys")"
done
for b in orterun orted ompi_info ssh rsh; do
	[ -e "/usr/bin/$b" ] && mount --bind /dev/null "$(readlink -f "/usr/bin/$b")"
done
source "$here/env.sh"
exec "$@"
