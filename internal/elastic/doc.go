// Package elastic is dml launch's supervisor: it starts a training job
// through a launcher (mpirun), reads the events its ranks send (events.go:
// the rank side is Send), and when the liveness ring reports a rank dead
// waits for the survivors' emergency checkpoints, ends the job and starts
// it again on the slots left (a failed slot of this machine for good, a
// failed host for its cool-down), resuming from the checkpoint; where
// --host-discovery or a cool-down's end brings hosts, it stops the job at
// a step boundary and starts it again larger. Each attempt is recorded
// (steps lost, recovery time) for the summary line and the JSON report,
// and the attempts' timelines are joined into one.
//
// The training command itself is the caller's (Job): the supervisor knows
// nothing of dml train's flags but the attempt number and the timeline
// file it gives each attempt. It imports only trainer/trace (to join
// timelines) and internal/regfile.
package elastic
