package mpi

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// MpirunArgs returns the mpirun command line that starts np copies of
// program with args: --oversubscribe so that more ranks than cores work,
// and --allow-run-as-root when running as root (containers, CI).
func MpirunArgs(np int, program string, args ...string) []string {
	cmd := []string{"mpirun", "-np", strconv.Itoa(np), "--oversubscribe"}
	if os.Geteuid() == 0 {
		cmd = append(cmd, "--allow-run-as-root")
	}
	// Shared memory between the ranks of one node: no network transports to
	// probe (slow, and noisy inside containers).
	cmd = append(cmd, "--mca", "btl", "self,vader")
	return append(append(cmd, program), args...)
}

// Relaunch runs this very program (os.Args) under mpirun with np ranks,
// passing stdout and stderr through, and returns its error. Tests use it to
// launch themselves when `go test` starts them outside mpirun.
func Relaunch(np int, extraEnv ...string) error {
	if _, err := exec.LookPath("mpirun"); err != nil {
		return fmt.Errorf("mpirun not found (install OpenMPI with `make deps`): %w", err)
	}
	argv := MpirunArgs(np, os.Args[0], os.Args[1:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), extraEnv...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %w", argv, err)
	}
	return nil
}
