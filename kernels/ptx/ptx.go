// Package ptx embeds the PTX that `make kernels` compiles from the CUDA C
// sources in kernels/cu, so that building the binary needs no CUDA
// toolchain; the cuda package loads these modules into each rank's context.
// kernels/cu/ABI.md is the contract for the entry points; abi.go holds the
// launch constants.
//
// Files are NAME.compute_XX.ptx: every source is compiled for compute_70
// (JIT-compiled by any newer driver) and compute_90 (Hopper), except the
// TF32 tensor-core GEMM (gemm_tf32), compiled for compute_80 only.
// `make kernels-check` verifies that the committed files are what the
// sources compile to.
//
// Beside each module the PTX for Hopper comes with, NAME.compute_XX.sm_90.cubin
// is the sm_90 machine code that ptxas (CUDA 11.8, -O3) assembles from
// exactly NAME.compute_XX.ptx: a device of compute capability 9.0 loads it
// instead of JIT-compiling the PTX at start-up (about 2.6 s for the four
// modules on an H200). ptxas's output is reproducible, and kernels-check
// verifies these bit for bit too.
package ptx

import (
	"embed"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

//go:embed *.ptx *.cubin
var files embed.FS

// Module is one compiled source file.
type Module struct {
	// Name is the source's base name ("gemm" for kernels/cu/gemm.cu).
	Name string
	// Arch is the virtual architecture the PTX targets: 70 for compute_70.
	Arch int
	// PTX is the module text, NUL-free; cuModuleLoadData wants it
	// NUL-terminated, which is the loader's job.
	PTX string
	// Cubin is machine code assembled from exactly PTX for the real
	// architecture CubinArch (90 for sm_90), or nil. All sets it wherever
	// one is embedded; ForDevice keeps it only for a device of compute
	// capability exactly CubinArch/10.CubinArch%10 (machine code for
	// sm_90 is not what a later architecture should run), so a loader
	// can use it whenever it is set and JIT-compile PTX otherwise (or when
	// loading the cubin fails). It contains NUL bytes: load it by length.
	Cubin     []byte
	CubinArch int
}

// Entries returns the kernel names the module defines.
func (m Module) Entries() []string { return Entries(m.PTX) }

// All returns every embedded module, ordered by name then arch.
func All() []Module {
	ents, err := files.ReadDir(".")
	if err != nil {
		panic(err) // the embedded FS always has its root
	}
	var mods []Module
	cubins := map[string][]byte{} // "NAME.compute_XX" → its sm_90 cubin
	for _, e := range ents {
		if base, ok := strings.CutSuffix(e.Name(), "."+cubinTarget+".cubin"); ok {
			b, err := files.ReadFile(path.Join(".", e.Name()))
			if err != nil {
				panic(err)
			}
			cubins[base] = b
			continue
		}
		var name string
		var arch int
		base, ok := strings.CutSuffix(e.Name(), ".ptx")
		i := strings.LastIndex(base, ".compute_")
		if !ok || i < 0 {
			panic(fmt.Sprintf("ptx: embedded file %s is not NAME.compute_XX.ptx or NAME.compute_XX.%s.cubin", e.Name(), cubinTarget))
		}
		name = base[:i]
		if _, err := fmt.Sscanf(base[i+len(".compute_"):], "%d", &arch); err != nil {
			panic(fmt.Sprintf("ptx: embedded file %s: bad arch: %v", e.Name(), err))
		}
		b, err := files.ReadFile(path.Join(".", e.Name()))
		if err != nil {
			panic(err)
		}
		mods = append(mods, Module{Name: name, Arch: arch, PTX: string(b)})
	}
	for i := range mods {
		key := fmt.Sprintf("%s.compute_%d", mods[i].Name, mods[i].Arch)
		if c, ok := cubins[key]; ok {
			mods[i].Cubin, mods[i].CubinArch = c, CubinArch
			delete(cubins, key)
		}
	}
	for key := range cubins {
		panic(fmt.Sprintf("ptx: embedded %s.%s.cubin has no %s.ptx", key, cubinTarget, key))
	}
	sort.Slice(mods, func(i, j int) bool {
		if mods[i].Name != mods[j].Name {
			return mods[i].Name < mods[j].Name
		}
		return mods[i].Arch < mods[j].Arch
	})
	return mods
}

// ForDevice returns the modules to load on a device of compute capability
// major.minor: for each source, the module with the highest arch the device
// can run (arch ≤ 10·major+minor), with its Cubin where one is embedded for
// exactly this compute capability. Sources with no such module are left out:
// below 7.0 that is every source (the caller reports the device as
// unsupported), below 8.0 it is gemm_tf32 (no TF32 tensor cores).
func ForDevice(major, minor int) []Module {
	cc := 10*major + minor
	best := map[string]Module{}
	for _, m := range All() {
		if m.Arch > cc {
			continue
		}
		if m.CubinArch != cc {
			m.Cubin, m.CubinArch = nil, 0
		}
		if b, ok := best[m.Name]; !ok || m.Arch > b.Arch {
			best[m.Name] = m
		}
	}
	out := make([]Module, 0, len(best))
	for _, m := range best {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CubinArch is the one real architecture machine code is embedded for:
// sm_90 (Hopper, the H200 the project measures on).
const CubinArch = 90

const cubinTarget = "sm_90"

// Cubin returns the machine code embedded for the module whose PTX is
// exactly ptxText, if the device's compute capability major.minor is
// exactly its architecture; else nil (JIT-compile the PTX).
func Cubin(ptxText string, major, minor int) []byte {
	for _, m := range ForDevice(major, minor) {
		if m.PTX == ptxText {
			return m.Cubin
		}
	}
	return nil
}

var entryRE = regexp.MustCompile(`(?m)^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\(`)

// Entries returns the names of the kernels (.entry directives) in a PTX
// text, in order.
func Entries(ptx string) []string {
	var names []string
	for _, m := range entryRE.FindAllStringSubmatch(ptx, -1) {
		names = append(names, m[1])
	}
	return names
}
