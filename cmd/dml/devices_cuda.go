//go:build cuda

package main

import (
	"fmt"

	"github.com/dml-project/dml/cuda" // registers the "cuda" backend
)

func init() { gpuInfo = cudaDevices }

// cudaDevices lists the devices this process sees, marking the one a rank
// of this local rank uses.
func cudaDevices(localRank int) (string, []string, error) {
	devs, err := cuda.Devices()
	if err != nil {
		return "", nil, err
	}
	ver, err := cuda.DriverVersion()
	if err != nil {
		return "", nil, err
	}
	use := cuda.DeviceFor(localRank, len(devs))
	summary := fmt.Sprintf("uses device %d of %d (driver CUDA %d.%d)", use, len(devs), ver/1000, ver%1000/10)
	lines := make([]string, len(devs))
	for i, d := range devs {
		mark := " "
		if i == use {
			mark = "*"
		}
		lines[i] = fmt.Sprintf("%s %d: %s, %.1f GiB, compute capability %d.%d, %d SMs, PCI %s",
			mark, d.Ordinal, d.Name, float64(d.TotalMemory)/(1<<30), d.Major, d.Minor, d.SMs, d.PCIBusID)
	}
	return summary, lines, nil
}
