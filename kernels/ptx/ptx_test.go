package ptx

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
)

// abiKernels returns the dml_* kernel names ABI.md's tables list (the first
// column of each table row), split into the TF32 GEMMs and the rest.
func abiKernels(t *testing.T) (fp32, tf32 []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "cu", "ABI.md"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\bdml_[a-z0-9_]+\b`)
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| dml_") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, n := range name.FindAllString(first, -1) {
			if seen[n] {
				continue
			}
			seen[n] = true
			if strings.Contains(n, "_tf32") {
				tf32 = append(tf32, n)
			} else {
				fp32 = append(fp32, n)
			}
		}
	}
	if len(fp32) < 20 || len(tf32) != 4 {
		t.Fatalf("ABI.md lists %d fp32 and %d TF32 kernels; the table format changed?", len(fp32), len(tf32))
	}
	return fp32, tf32
}

// entriesFor returns the entry points of every module with this arch.
func entriesFor(arch int) map[string]string {
	m := map[string]string{}
	for _, mod := range All() {
		if mod.Arch == arch {
			for _, e := range mod.Entries() {
				m[e] = mod.Name
			}
		}
	}
	return m
}

func TestEveryABIKernelIsEmbedded(t *testing.T) {
	fp32, tf32 := abiKernels(t)
	for _, arch := range []int{70, 90} {
		have := entriesFor(arch)
		for _, k := range fp32 {
			if _, ok := have[k]; !ok {
				t.Errorf("compute_%d PTX lacks %s (listed in ABI.md)", arch, k)
			}
		}
		for _, k := range tf32 {
			if _, ok := have[k]; ok {
				t.Errorf("compute_%d PTX has the TF32 kernel %s", arch, k)
			}
		}
	}
	have := entriesFor(80)
	for _, k := range tf32 {
		if have[k] != "gemm_tf32" {
			t.Errorf("compute_80 PTX lacks %s in module gemm_tf32", k)
		}
	}
	// And nothing undocumented: every entry is in ABI.md.
	all := append(slices.Clone(fp32), tf32...)
	for _, mod := range All() {
		for _, e := range mod.Entries() {
			if !slices.Contains(all, e) {
				t.Errorf("%s.compute_%d defines %s, which ABI.md does not list", mod.Name, mod.Arch, e)
			}
		}
	}
}

func TestModulesPerArch(t *testing.T) {
	var names []string
	for _, m := range All() {
		names = append(names, m.Name+"."+strconv.Itoa(m.Arch))
		if !strings.Contains(m.PTX, "\n.target sm_"+strconv.Itoa(m.Arch)+"\n") {
			t.Errorf("%s.compute_%d: .target does not match the file name", m.Name, m.Arch)
		}
		if strings.ContainsRune(m.PTX, 0) {
			t.Errorf("%s.compute_%d contains a NUL byte", m.Name, m.Arch)
		}
	}
	want := []string{"conv.70", "conv.90", "elementwise.70", "elementwise.90", "gemm.70", "gemm.90", "gemm_tf32.80", "loss.70", "loss.90", "reduce.70", "reduce.90", "transformer.70", "transformer.90"}
	if !slices.Equal(names, want) {
		t.Errorf("embedded modules %v, want %v", names, want)
	}
}

// The compute_70 and compute_90 PTX must not use tensor-core or TF32
// instructions (compute_70 cannot run them; TF32 is opt-in), and the TF32
// module must.
func TestNoTensorCoreOutsideTF32(t *testing.T) {
	bad := regexp.MustCompile(`\b(mma|wmma)\.|\.tf32\b`)
	for _, m := range All() {
		found := bad.FindString(m.PTX)
		switch {
		case m.Name == "gemm_tf32":
			if !strings.Contains(m.PTX, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") || !strings.Contains(m.PTX, "cvt.rna.tf32.f32") {
				t.Errorf("gemm_tf32.compute_%d has no TF32 mma.sync / cvt.rna.tf32", m.Arch)
			}
		case found != "":
			t.Errorf("%s.compute_%d contains %q", m.Name, m.Arch, found)
		}
	}
}

// No float atomics anywhere (determinism, ABI.md); the one integer
// atomicMin is dml_nonfinite's.
func TestNoFloatAtomics(t *testing.T) {
	atom := regexp.MustCompile(`\b(atom|red)(\.[a-z]+)*\.(f32|f64|f16|bf16)\b`)
	for _, m := range All() {
		if s := atom.FindString(m.PTX); s != "" {
			t.Errorf("%s.compute_%d: float atomic %q", m.Name, m.Arch, s)
		}
	}
}

func TestForDevice(t *testing.T) {
	names := func(ms []Module) []string {
		var s []string
		for _, m := range ms {
			s = append(s, m.Name+"."+strconv.Itoa(m.Arch))
		}
		sort.Strings(s)
		return s
	}
	cases := []struct {
		major, minor int
		want         []string
	}{
		{6, 1, nil},
		{7, 0, []string{"conv.70", "elementwise.70", "gemm.70", "loss.70", "reduce.70", "transformer.70"}},
		{8, 6, []string{"conv.70", "elementwise.70", "gemm.70", "gemm_tf32.80", "loss.70", "reduce.70", "transformer.70"}},
		{9, 0, []string{"conv.90", "elementwise.90", "gemm.90", "gemm_tf32.80", "loss.90", "reduce.90", "transformer.90"}},
		{12, 0, []string{"conv.90", "elementwise.90", "gemm.90", "gemm_tf32.80", "loss.90", "reduce.90", "transformer.90"}},
	}
	for _, c := range cases {
		if got := names(ForDevice(c.major, c.minor)); !slices.Equal(got, c.want) {
			t.Errorf("ForDevice(%d, %d) = %v, want %v", c.major, c.minor, got, c.want)
		}
	}
}

func TestEntries(t *testing.T) {
	src := ".visible .entry a_b(\n\t.param .u64 x\n)\n// .entry not_this(\n.entry c1 (\n.weak .entry d$(\n"
	got := Entries(src)
	want := []string{"a_b", "c1", "d$"}
	if !slices.Equal(got, want) {
		t.Errorf("Entries = %v, want %v", got, want)
	}
}

func TestPickGemm(t *testing.T) {
	g := PickGemm(false, true, false, 4096, 4096, 4096, 132)
	if g.Name != "dml_sgemm_nt" || g.BlockM != GemmBlockM || g.Threads != GemmThreads {
		t.Errorf("4096²: %+v", g)
	}
	if x, y := g.Grid(4096, 4096); x != 32 || y != 32 {
		t.Errorf("grid %d×%d, want 32×32", x, y)
	}
	if g := PickGemm(true, false, false, 1024, 1024, 1024, 132); g.Name != "dml_sgemm64_tn" || g.BlockN != Gemm64BlockN {
		t.Errorf("1024²: %+v", g)
	} else if x, y := g.Grid(1024, 1024); x != 16 || y != 8 {
		t.Errorf("1024² grid %d×%d, want 16×8", x, y)
	}
	// Skinny: the MLP's 10-class layer forward (nt, n = 10) and weight
	// gradient (tn, m = 10); short k stays tiled.
	if g := PickGemm(false, true, false, 1024, 10, 1024, 132); g.Name != "dml_sgemm_skinnyn_nt" || g.Wide != 1 {
		t.Errorf("1024×10×1024 nt: %+v", g)
	} else if x, y := g.Grid(1024, 10); x != 1024 || y != 1 {
		t.Errorf("skinnyn grid %d×%d, want 1024×1", x, y)
	}
	if g := PickGemm(true, false, false, 10, 1024, 1024, 132); g.Name != "dml_sgemm_skinnym_tn" || g.Wide != 8 {
		t.Errorf("10×1024×1024 tn: %+v", g)
	} else if x, y := g.Grid(10, 1024); x != 128 || y != 1 {
		t.Errorf("skinnym grid %d×%d, want 128×1", x, y)
	}
	if g := PickGemm(false, false, false, 1024, 10, 10, 132); g.Skinny != 0 {
		t.Errorf("k = 10 should stay tiled: %+v", g)
	}
	if g := PickGemm(true, true, true, 1024, 1024, 1024, 132); g.Name != "dml_sgemm_tf32_tt" || !g.TF32 {
		t.Errorf("tf32: %+v", g)
	}
	// TF32 leaves to the float32 kernels what they do faster: a side
	// narrower than its tile (a convolution's forward product), the
	// split-K products (its weight gradient, a 10-class layer), a short k.
	for _, c := range []struct {
		transA, transB bool
		m, n, k        int
		want           string
	}{
		{false, false, 16, 131072, 144, "dml_sgemm_nn"},
		{false, true, 16, 144, 131072, "dml_sgemm_skinnym_nt"},
		{false, true, 1024, 10, 1024, "dml_sgemm_skinnyn_nt"},
		{false, false, 1024, 1024, 10, "dml_sgemm64_nn"},
		{false, false, 64, 64, 64, "dml_sgemm64_nn"},
	} {
		if g := PickGemm(c.transA, c.transB, true, c.m, c.n, c.k, 132); g.Name != c.want || g.TF32 {
			t.Errorf("tf32 %d×%d×%d: %+v, want %s", c.m, c.n, c.k, g, c.want)
		}
	}
	if _, y := (Gemm{BlockM: 1, BlockN: 1}).Grid(1<<20, 1); y != MaxGridY {
		t.Errorf("grid y not clamped: %d", y)
	}
	// Every name PickGemm returns is embedded.
	ents := entriesFor(90)
	for _, fam := range GemmFamilies {
		for _, sfx := range []string{"nn", "nt", "tn", "tt"} {
			if _, ok := ents[fam+sfx]; !ok {
				t.Errorf("%s%s not in the compute_90 PTX", fam, sfx)
			}
		}
	}
}

// Machine code: every module a compute capability 9.0 device loads has its
// sm_90 cubin (an ELF image), no other device gets one, and Cubin finds it
// by the PTX text.
func TestCubins(t *testing.T) {
	for _, m := range ForDevice(9, 0) {
		if len(m.Cubin) < 4 || string(m.Cubin[:4]) != "\x7fELF" || m.CubinArch != CubinArch {
			t.Errorf("%s.compute_%d: no sm_90 cubin for cc 9.0 (%d bytes, arch %d)", m.Name, m.Arch, len(m.Cubin), m.CubinArch)
		}
		if c := Cubin(m.PTX, 9, 0); len(c) != len(m.Cubin) {
			t.Errorf("Cubin(%s PTX, 9, 0): %d bytes, want %d", m.Name, len(c), len(m.Cubin))
		}
		if c := Cubin(m.PTX, 10, 0); c != nil {
			t.Errorf("Cubin(%s PTX, 10, 0) = %d bytes, want none (sm_90 code is for cc 9.0)", m.Name, len(c))
		}
	}
	for _, cc := range [][2]int{{7, 0}, {8, 0}, {8, 9}, {10, 0}, {12, 0}} {
		for _, m := range ForDevice(cc[0], cc[1]) {
			if m.Cubin != nil {
				t.Errorf("cc %d.%d: %s.compute_%d comes with a cubin", cc[0], cc[1], m.Name, m.Arch)
			}
		}
	}
	if Cubin("not a module", 9, 0) != nil {
		t.Error("Cubin of unknown PTX is not nil")
	}
}

// TestOptimizerKernelsABI: each optimizer rule's kernel (optim.Kind.Kernel)
// is in ABI.md with the parameters the runtime launches it with: w, g, the
// state where the rule keeps one, n, a rate pointer for a per-tensor rule,
// then one float per optim.Update.AppendScalars value.
func TestOptimizerKernelsABI(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "cu", "ABI.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{} // kernel: its parameters' types
	for _, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| dml_") || len(cols) < 3 {
			continue
		}
		var types []string
		for _, p := range strings.Split(strings.Trim(strings.TrimSpace(cols[2]), "()"), ",") {
			f := strings.Fields(p)
			types = append(types, strings.Join(f[:len(f)-1], " "))
		}
		rows[strings.TrimSpace(cols[1])] = types
	}
	for _, k := range optim.Kinds {
		cfg := optim.Config{Kind: k, LR: 0.1, Momentum: 0.9, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999, TrustCoef: 0.001}
		u := optim.NewUpdate(cfg)
		want := []string{"float*", "const float*"}
		if k.HasState() {
			want = append(want, "float*")
		}
		want = append(want, "long long")
		if k.PerTensor() {
			want = append(want, "const float*")
		}
		for range u.AppendScalars(nil) {
			want = append(want, "float")
		}
		got, ok := rows[k.Kernel()]
		if !ok {
			t.Errorf("%v: ABI.md has no kernel %q", k, k.Kernel())
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: ABI.md's %s takes %q; the runtime launches it with %q", k, k.Kernel(), got, want)
		}
	}
}
