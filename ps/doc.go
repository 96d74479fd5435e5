// Package ps is the parameter server: a flat float32 model of P keys is split
// into contiguous key ranges owned by server ranks, and worker ranks pull
// weights from and push gradients to the owners of the keys they need
// (Li et al., OSDI'14; DistBelief's Downpour SGD).
//
// Ranks 0..S-1 are servers, ranks S..N-1 are workers. Each server runs
// RunServer; each worker makes a Worker with NewWorker and loops
//
//	w, err := ps.NewWorker(c, cfg, len(model))
//	for step := 0; step < steps; step++ {
//		if err := w.Pull(model); err != nil { ... } // blocks as the consistency model requires
//		grad := computeGradient(model)
//		if err := w.Push(grad); err != nil { ... }
//	}
//	err = w.Done()
//
// while the servers call
//
//	stats, err := ps.RunServer(c, cfg, initialModel)
//
// and return once every worker has called Done (or with an error naming the
// workers that went missing). Both take a Transport (any collectives.Comm).
//
// # Pieces
//
//   - config.go: Config, Consistency; errors.go: sentinel errors.
//   - partition.go: which server owns which key range (Partition, Owner).
//   - transport.go: Transport, the byte messages the package needs from a
//     communicator (any collectives.Comm), and RunServer, the I/O driver.
//   - wire.go, decode.go, floatbytes.go: the binary messages.
//   - consistency.go, dssp.go: when a worker may start its next iteration
//     (BSP, SSP, ASP, DSSP). The controllers are pure bookkeeping: time comes
//     in as an argument, they do no I/O.
//   - update.go: the server-side update, kernels/optim's rules (SGD,
//     momentum, Adagrad) over the server's range or single keys.
//   - filter.go (and internal/half): push filters (significantly-modified, float16
//     and bfloat16 compression).
//   - server.go, aggregate.go, liveness.go: the server as a state machine
//     (etcd raft style): Server.Step handles one request and returns the
//     replies to send, Server.Tick sends keep-alives and finds missing
//     workers; time comes in as an argument and neither does I/O, so the
//     consistency and liveness rules are tested on a fake clock.
//   - worker.go, worker_check.go: the worker side (its wait bookkeeping,
//     serverWait, is pure too); stats.go: what both measure.
//   - parallel.go: element-wise work over long ranges, split over cores.
//   - snapshot.go: checkpoints: a worker's snapshot request for the
//     servers' weights and optimizer state (held like a pull), and
//     Config.Restore / Worker.Resume to start from a checkpoint.
//
// A worker may also fuse a step's push and the next pull into one request
// per server (Worker.PushPull, PushPullKeys): the server applies the push
// and answers with the weights once the consistency model lets the worker
// go on; under BSP the bits are those of Push then Pull.
//
// # Wire path
//
// Headers are byte messages (wire.go). On a transport that also moves
// float32 buffers (Isend/Irecv: every collectives.Comm), float32 values
// travel apart on PayloadTag, straight from the worker's gradient slice
// into a server-owned buffer and from the server's weights into the
// worker's destination slice: no encoding, decoding or staging copy (the
// MPI transport pins both ends). A reply viewing the weights is copied
// only when a later request of the same batch changes them. Inline values
// (fp16/bf16 pushes, bytes-only transports, Config.InlineValues) are
// aligned so that a server views float32 pushes in place. Requests, key
// lists and value buffers are reused per worker: Server.Step and the
// worker's calls allocate nothing per message in steady state (tests use
// testing.AllocsPerRun); what a transport allocates per receive is its
// own. Element-wise work over ranges of 128K keys and more (updates, BSP
// sums and averages) is split over cores (parallel.go), with the same bits.
// Waiting happens only inside the transport's receive and Request.Wait
// (for MPI, the shim's wait policy), never in a Go loop of the package.
//
// # Faults
//
// Nothing waits forever. A server that holds a request sends the worker a
// keep-alive every Timeout/4; a worker gives up on a server it has not heard
// from for 2*Timeout. A server gives up (RunServer returns a *MissingError
// naming the ranks and their clocks, and tells the other workers) when the
// workers others are waiting on have been silent for Timeout, or when every
// remaining worker has. RunServer runs these checks (Server.Tick) after
// every receive and at least every Timeout/4.
//
// # Consistency and updates
//
// A worker's clock is the number of pushes it has made. Under BSP the server
// sums every worker's step-t gradient (in worker rank order, so the result is
// deterministic), divides by the number of contributions and applies one
// optimizer step; no worker may pull for step t+1 before that, so BSP+SGD is
// synchronous SGD on the averaged gradient. Under SSP, ASP and DSSP every push
// is applied as it arrives, each worker's gradient scaled by the learning rate
// alone (Downpour style, not divided by the number of workers).
//
// Staleness, as recorded at each pull, is the puller's clock minus the
// smallest clock of the workers that have not called Done.
package ps
