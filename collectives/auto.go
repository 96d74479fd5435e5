package collectives

// Auto: which AllReduce algorithm to run for a message of a given size on a
// given number of ranks, from measured thresholds.
//
// The choice depends only on (bytes, ranks, whether the transport has a
// native AllReduce), which every rank of a job knows alike (Allreducer
// checks the lengths first), so every rank runs the same algorithm. Ring,
// Tree and Native round differently at 3 ranks or more; each is
// deterministic, so Auto is too.
//
// Measured with `dml bench allreduce -b 4K -e 64M -f 2 -n 20 -w 3 --algo
// ring,tree,mpi,auto` (algorithms taking turns iteration by iteration;
// median µs of the slowest rank) under `mpirun --oversubscribe -np {2,4}
// --mca btl self,vader`, 10 runs per rank count, on a 2-core KVM guest (AMD
// EPYC), OpenMPI 4.1.4 over shared memory. 4 ranks run oversubscribed on
// the 2 cores. Median µs of the 10 runs (the ring's small sizes include its
// length check, which moved from point to point to MPI in the last 3):
//
//	bytes   2 ranks: ring    tree     mpi   4 ranks: ring    tree     mpi
//	4K                5.9     5.9     2.5              81.1    37.5    32.6
//	8K               38.0     7.7     7.7              63.7    39.4    46.1
//	16K              14.0     8.9     9.9               108    48.4    62.5
//	32K              17.4    13.1    13.2               149    75.8    87.7
//	64K              21.6    20.8    18.1               183     131     121
//	128K             34.6    37.9    30.9               273     253     213
//	256K             59.9    70.1    54.9               516     478     411
//	512K             98.5     106    91.4               842     775     615
//	1M                163     195     174              1508    1532    1178
//	2M                328     454     352              2936    3429    2509
//	4M                899    1230     993              6213    8180    5604
//	8M               2464    3177    2669             11873   18025   12444
//	16M              4479    6795    5760             20891   32239   23290
//	32M              9020   12560   21189             37004   56327   63409
//	64M             17656   24186   40042             66444   96532  114327
//
// Winner per run (of 10) and median ratio within a run:
//
//	2 ranks: 4K mpi 10/10 (tree/mpi 2.4); 8K, 16K tree 9/10 (0.90, 0.89);
//	32K tree 6/10 (0.99); 64K-512K mpi 8-10/10; 1M-64M ring 8-10/10
//	(ring/mpi 0.80-0.93 to 16M, 0.42 from 32M).
//	4 ranks: 4K mpi 10/10 (tree/mpi 1.16); 8K-32K tree 8-10/10 (0.80-0.91);
//	64K-2M mpi 9-10/10; 4M mpi 7/10 (ring/mpi 1.05); 8M-64M ring 6-10/10.
//	Ring against tree (transports without Native): tree wins to 64K at 2
//	ranks (ring/tree 1.04 at 64K, 0.91 at 128K) and to 512K at 4 ranks
//	(1.05 at 512K, 0.96 at 1M).
//
// So, with MPI: at 2 ranks mpi to 4K (one eager message inside MPI), tree
// 8K-32K, mpi 64K-512K, ring from 1M; at 4 ranks mpi to 4K, tree 8K-32K,
// mpi 64K-4M, ring from 8M (MPI_Allreduce's algorithm above 16M loses
// 2×). Without a native AllReduce (collectives/local): tree to 64K at 2
// ranks, to 512K at 4 (the ring's 2(n−1) dependent hops, each of which may
// wait for a descheduled neighbour, cost more there). Auto itself pays the
// length check on top (Allreducer.checkLengths: about 0.9 µs at 2 ranks and
// 11 µs at 4 over MPI), which is what separates it from the best algorithm
// at the smallest sizes.
//
// Measured again on 2026-11-27 (issue 29: auto read 0.74–0.77 of the best
// at 4 KiB at 2 ranks), `dml bench allreduce -b 4K -e 1M -n 200 -w 20 --algo
// ring,tree,mpi,auto`, 3 runs, 2-core Intel Xeon KVM guest, median µs:
//
//	bytes   ring  tree   mpi   (2 ranks)
//	4K       5.3   4.9   3.8
//	8K       7.0   5.2   7.0
//	16K      8.7   8.0   7.6
//	32K     11.5  13.5  10.5
//	64K     16.5  23.9  15.8
//
// The tree no longer wins at 16K and 32K there (0.71–0.73 of mpi at 32K
// when auto took it): at 2 ranks the tree's window is 8K alone now. And
// the bench measured auto with the length check that no other algorithm
// paid (about 1 µs: auto at 4 KiB 0.82 of mpi for it) while dml train
// skips it; the bench now skips it for every algorithm (--length-check
// puts it back).
//
// Not measured, extrapolated: 3 ranks sit between 2 and 4 (recursive
// doubling on 3 ranks folds one rank in: two extra whole-buffer hops, so
// it gets no window of its own); 5-8 ranks use the 4-rank table, with the
// tree window only for powers of two, since folding costs the tree two
// whole-buffer hops more; more than 8 ranks likewise (unmeasured).

// autoStep is one row of a threshold table: messages up to maxBytes use algo.
type autoStep struct {
	maxBytes int
	algo     Algorithm
}

const unbounded = int(^uint(0) >> 1)

var (
	// With a native AllReduce (MPI).
	autoNative2 = []autoStep{{4 << 10, Native}, {8 << 10, Tree}, {512 << 10, Native}, {unbounded, Ring}}
	autoNative3 = []autoStep{{2 << 20, Native}, {unbounded, Ring}}
	autoNative4 = []autoStep{{4 << 10, Native}, {32 << 10, Tree}, {4 << 20, Native}, {unbounded, Ring}}
	autoNative5 = []autoStep{{4 << 20, Native}, {unbounded, Ring}} // 5-8 ranks, not a power of two
	// Point to point only (collectives/local, or anything without Native).
	autoP2P2 = []autoStep{{64 << 10, Tree}, {unbounded, Ring}}
	autoP2P3 = []autoStep{{64 << 10, Tree}, {unbounded, Ring}}
	autoP2P4 = []autoStep{{512 << 10, Tree}, {unbounded, Ring}}
)

// AutoChoice is the algorithm Auto runs for an AllReduce of `bytes` bytes on
// `ranks` ranks; native says whether the transport implements
// NativeAllreducer. It never returns Auto, and returns Native only when
// native is true.
func AutoChoice(bytes, ranks int, native bool) Algorithm {
	powerOfTwo := ranks&(ranks-1) == 0
	var table []autoStep
	switch {
	case native && ranks <= 2:
		table = autoNative2
	case native && ranks == 3:
		table = autoNative3
	case native && powerOfTwo:
		table = autoNative4
	case native:
		table = autoNative5
	case ranks <= 2:
		table = autoP2P2
	case ranks == 3:
		table = autoP2P3
	default:
		table = autoP2P4
	}
	for _, s := range table {
		if bytes <= s.maxBytes {
			return s.algo
		}
	}
	return Ring
}
