# env.sh: source this on the GPU machine (bash) to run our cgo/OpenMPI
# binaries with the runtime bundle that bench/gpu/pack-mpi.sh packed here:
#
#   source bench/gpu/env.sh && mpirun -np 2 ./dml train ...
#
# The bundle is looked for at $DML_MPI_BUNDLE, else at .gpukit/mpi beside the
# repository root this file is in. Nothing of the GPU machine's own MPI (if
# any) is used: the bundle's bin/ and lib/ come first. When only the tarball
# .gpukit/mpi.tgz was carried, it is unpacked beside itself first.

_dml_here=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export DML_MPI_BUNDLE=${DML_MPI_BUNDLE:-$(cd "$_dml_here/../.." && pwd)/.gpukit/mpi}
unset _dml_here
if [ ! -x "$DML_MPI_BUNDLE/bin/orterun" ] && [ -f "$DML_MPI_BUNDLE.tgz" ]; then
	tar xzf "$DML_MPI_BUNDLE.tgz" -C "$(dirname "$DML_MPI_BUNDLE")"
fi
if [ ! -x "$DML_MPI_BUNDLE/bin/orterun" ]; then
	echo "env.sh: no OpenMPI bundle at $DML_MPI_BUNDLE (run bench/gpu/pack-mpi.sh where OpenMPI is installed, and carry .gpukit)" >&2
	return 1 2>/dev/null || exit 1
fi

# Where OpenMPI (opal installdirs "env" component) and PMIx look for their
# plugins, help texts and configuration: Debian's absolute paths, moved.
export OPAL_PREFIX=$DML_MPI_BUNDLE
export OPAL_EXEC_PREFIX=$DML_MPI_BUNDLE
export OPAL_BINDIR=$DML_MPI_BUNDLE/bin
export OPAL_LIBDIR=$DML_MPI_BUNDLE/lib
export OPAL_PKGLIBDIR=$DML_MPI_BUNDLE/lib/openmpi
export OPAL_DATAROOTDIR=$DML_MPI_BUNDLE/share
export OPAL_DATADIR=$DML_MPI_BUNDLE/share
export OPAL_PKGDATADIR=$DML_MPI_BUNDLE/share/openmpi
export OPAL_SYSCONFDIR=$DML_MPI_BUNDLE/etc
export PMIX_PREFIX=$DML_MPI_BUNDLE
export PMIX_LIBDIR=$DML_MPI_BUNDLE/lib
export PMIX_PKGLIBDIR=$DML_MPI_BUNDLE/lib/pmix
export PMIX_DATAROOTDIR=$DML_MPI_BUNDLE/share
export PMIX_DATADIR=$DML_MPI_BUNDLE/share
export PMIX_PKGDATADIR=$DML_MPI_BUNDLE/share/pmix
export PMIX_SYSCONFDIR=$DML_MPI_BUNDLE/etc
export OMPI_MCA_mca_base_component_path=$DML_MPI_BUNDLE/lib/openmpi
export OMPI_MCA_mca_base_param_files=$DML_MPI_BUNDLE/etc/openmpi-mca-params.conf
export OMPI_MCA_orte_default_hostfile=$DML_MPI_BUNDLE/etc/openmpi-default-hostfile
export PMIX_MCA_mca_base_component_path=$DML_MPI_BUNDLE/lib/pmix
# hwloc: load none of the GPU machine's hwloc plugins (another version).
export HWLOC_PLUGINS_PATH=$DML_MPI_BUNDLE/lib/hwloc

export PATH=$DML_MPI_BUNDLE/bin:$PATH
export LD_LIBRARY_PATH=$DML_MPI_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# One node, shared memory only; what MpirunArgs passes on its command line,
# here as the environment so that a bare `mpirun -np 2 prog` does the same.
export OMPI_MCA_btl=self,vader
export OMPI_MCA_pml=ob1
# No ssh on the GPU machine, and every rank is local: the isolated launcher.
export OMPI_MCA_plm=isolated
# process_vm_readv (CMA) may be refused inside the VM: copy through the
# shared segment instead.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# Commands run as root there: mpirun's --allow-run-as-root, as the environment.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
