// The C half of the shim: see shim.go for why it exists.
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"

// dml_yield: give the core away while waiting (set by Init when this node's
// ranks outnumber its cores).
int dml_yield = 1;

int dml_online_cpus(void) {
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int dml_init(int multiple, int *provided) {
	int flag = 0;
	MPI_Initialized(&flag);
	if (!flag) {
		int rc = MPI_Init_thread(NULL, NULL, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED, provided);
		if (rc != MPI_SUCCESS) return rc;
	} else {
		MPI_Query_thread(provided);
	}
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

int dml_rank(int *r) { return MPI_Comm_rank(MPI_COMM_WORLD, r); }
int dml_size(int *n) { return MPI_Comm_size(MPI_COMM_WORLD, n); }
// dml_tag_ub is MPI_TAG_UB, the largest tag this MPI allows (-1: not known).
int dml_tag_ub(void) {
	int *v = NULL, flag = 0;
	if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag) != MPI_SUCCESS || !flag || v == NULL) return -1;
	return *v;
}
int dml_finalize(void) { return MPI_Finalize(); }
void dml_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
int dml_ibarrier(MPI_Request *req) { return MPI_Ibarrier(MPI_COMM_WORLD, req); }

// Doorbells: waking a sleeping peer on this node.
//
// OpenMPI's shared-memory transport cannot block: a rank that waits for a
// message polls, and between polls it sleeps (the back-off below). A
// request-reply exchange (a parameter-server push or pull) then pays a
// sleep's remainder on each side: measured, dml's fused push+pull ran at
// half its plain push-then-pull rate because both sides were asleep when
// the other's message came. So every rank of a node has a doorbell in the
// node's shared board (board.go): a sequence number and a count of its
// threads asleep on it. A rank rings the destination's bell after posting
// a send (its header is then in the destination's queue) and the source's
// after a receive completes (a large message's sender waits for that);
// a waiter past its yield phase reads its bell before each poll and, if
// the poll finds nothing, sleeps on the bell with the back-off's timeout
// (FUTEX_WAIT returns at once if the bell rang since it was read). The
// ring costs an atomic add, and a FUTEX_WAKE only when the peer sleeps.
// A rank on another node has no bell here (its slot is never waited on),
// and its messages are found by the timed polls as before. Waking is only
// ever early: correctness never depends on a bell.
dml_bell *dml_bells = NULL;
int dml_nbells = 0, dml_me = -1;

static long dml_futex(unsigned *addr, int op, unsigned val, const struct timespec *ts) {
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

void dml_ring(int r) {
	dml_bell *bells = dml_bells;
	if (bells == NULL || r < 0 || r >= dml_nbells) return;
	dml_bell *b = &bells[r];
	__atomic_fetch_add(&b->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&b->sleepers, __ATOMIC_SEQ_CST) != 0) dml_futex(&b->seq, FUTEX_WAKE, INT_MAX, NULL);
}

int dml_isend_f32(void *buf, int n, int to, int tag, MPI_Request *req) {
	int rc = MPI_Isend(buf, n, MPI_FLOAT, to, tag, MPI_COMM_WORLD, req);
	dml_ring(to);
	return rc;
}
int dml_irecv_f32(void *buf, int n, int from, int tag, MPI_Request *req) {
	return MPI_Irecv(buf, n, MPI_FLOAT, from, tag, MPI_COMM_WORLD, req);
}
int dml_isend_bytes(void *buf, int n, int to, int tag, MPI_Request *req) {
	int rc = MPI_Isend(buf, n, MPI_BYTE, to, tag, MPI_COMM_WORLD, req);
	dml_ring(to);
	return rc;
}
int dml_iallgather_bytes(void *send, int n, void *recv, MPI_Request *req) {
	return MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_COMM_WORLD, req);
}
int dml_allreduce_sum_f32(void *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

// Waiting for a peer: spin, then yield, then sleep.
//
// A wait first spins on MPI_Test (or MPI_Iprobe) for dml_spin_ns, so that a
// message that is nearly there (a ring step, a small AllReduce) is picked
// up within a poll. Then, until dml_yield_ns have passed, it calls
// sched_yield between polls (a runnable thread on this core, such as the
// rank's own compute or an oversubscribed peer, gets it; with nobody to
// yield to this is a spin with a system call). After that it sleeps between
// polls, dml_sleep_min_ns at first and twice as long each time up to
// dml_sleep_max_ns; once the wait has lasted 16 times that, the cap grows
// with it, to a sixteenth of the time waited so far (at most 1/16 late),
// up to dml_sleep_long_ns. Each sleep-and-poll costs about 20 µs of CPU on
// a KVM guest (timer, two context switches, MPI progress), so a 100 µs cap
// alone costs 15-20% of a core; a long wait (a peer still computing, a
// parameter-server reply) costs a few per cent with the 1 ms cap, instead
// of the whole core that the rank's compute needs. The
// waiting thread's timer slack is set to 1 µs (prctl) so that the short
// sleeps are not stretched by the default 50 µs slack.
//
// A negative dml_spin_ns means spin for ever (the pre-backoff policy, kept
// for comparison: DML_MPI_WAIT=spin). When this node's ranks outnumber its
// cores (dml_yield), the spin phase yields after its first 2000 polls, as
// the earlier policy did.
//
// Deadlines: every poll is followed by a deadline check, and a sleep never
// runs past the deadline, so a wait returns DML_TIMEOUT within about one
// poll of it; a message that completes before the deadline is never
// reported as a timeout.
long long dml_spin_ns = 50000;
long long dml_yield_ns = 200000;
long long dml_sleep_min_ns = 10000;
long long dml_sleep_max_ns = 100000;
long long dml_sleep_long_ns = 1000000;

static __thread int dml_slack_set;

static long long dml_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef struct {
	long long start, deadline, sleep, polls, last;
	int sleeping; // past the yield phase: the pauses sleep
	int armed;    // counted among the bell's sleepers, having read seen
	unsigned seen;
} dml_backoff;

// A pause between two polls longer than this means the process did not
// run (SIGSTOP, a starved or suspended VM): the wait's deadline moves by
// that much, so that a rank that was stopped does not, once continued,
// report that it waited for its peers all that time.
#define DML_GAP_NS 1000000000LL

static void dml_backoff_init(dml_backoff *b, double timeout) {
	b->start = dml_now_ns();
	if (!(timeout < 1e9)) timeout = 1e9; // also catches NaN; about 31 years
	if (timeout < 0) timeout = 0;
	b->deadline = b->start + (long long)(timeout * 1e9);
	b->sleep = dml_sleep_min_ns;
	b->polls = 0;
	b->last = b->start;
	b->sleeping = b->armed = 0;
}

// dml_backoff_arm is called before each poll: in the sleep phase it counts
// this thread among the bell's sleepers and reads the bell, so that a ring
// after this point makes the pause that follows a fruitless poll return at
// once (or wakes it). Sleepers are counted before the read (both atomic,
// sequentially consistent), and a ringer adds before it reads the count:
// either this poll sees the message, the read sees the ring, or the ringer
// sees the sleeper.
static void dml_backoff_arm(dml_backoff *b) {
	dml_bell *bells = dml_bells;
	if (!b->sleeping || bells == NULL || b->armed) return;
	dml_bell *me = &bells[dml_me];
	__atomic_fetch_add(&me->sleepers, 1, __ATOMIC_SEQ_CST);
	b->seen = __atomic_load_n(&me->seq, __ATOMIC_SEQ_CST);
	b->armed = 1;
}

// dml_backoff_disarm ends the wait's count among the sleepers (the poll
// found its message, or the pause is over).
static void dml_backoff_disarm(dml_backoff *b) {
	if (b->armed) {
		__atomic_fetch_sub(&dml_bells[dml_me].sleepers, 1, __ATOMIC_SEQ_CST);
		b->armed = 0;
	}
}

// dml_backoff_pause is called after a poll that found nothing: it returns
// DML_TIMEOUT once the deadline has passed, else waits a little (per the
// policy above) and returns 0, and the caller polls again.
static int dml_backoff_pause(dml_backoff *b) {
	long long now = dml_now_ns();
	if (now - b->last > DML_GAP_NS) b->deadline += now - b->last; // did not run: not waiting time
	b->last = now;
	if (now >= b->deadline) return DML_TIMEOUT;
	long long elapsed = now - b->start;
	b->polls++;
	if (dml_spin_ns < 0 || elapsed < dml_spin_ns) {
		if (dml_yield && b->polls > 2000) sched_yield();
		return 0;
	}
	if (elapsed < dml_yield_ns) {
		sched_yield();
		return 0;
	}
	if (!dml_slack_set) {
		prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
		dml_slack_set = 1;
	}
	b->sleeping = 1;
	long long d = b->sleep;
	if (d > b->deadline - now) d = b->deadline - now;
	struct timespec ts = {(time_t)(d / 1000000000LL), (long)(d % 1000000000LL)};
	if (b->armed) {
		// Returns at the timeout, at a ring, or at once if one came since
		// the poll's read; any of them only means the next poll.
		dml_futex(&dml_bells[dml_me].seq, FUTEX_WAIT, b->seen, &ts);
		dml_backoff_disarm(b);
	} else {
		nanosleep(&ts, NULL); // an early return (a signal) only means an early poll
	}
	long long cap = elapsed / 16;
	if (cap > dml_sleep_long_ns) cap = dml_sleep_long_ns;
	if (cap < dml_sleep_max_ns) cap = dml_sleep_max_ns;
	b->sleep *= 2;
	if (b->sleep > cap) b->sleep = cap;
	if (b->sleep < 1000) b->sleep = 1000;
	return 0;
}

// dml_wait tests req until it completes or `timeout` seconds pass (then
// DML_TIMEOUT), backing off as described above. count (NULL for a send, a
// barrier or a collective) receives a receive's float32 count.
int dml_wait(MPI_Request *req, double timeout, int *count) {
	dml_backoff b;
	dml_backoff_init(&b, timeout);
	MPI_Status st;
	int flag = 0;
	for (;;) {
		dml_backoff_arm(&b);
		int rc = MPI_Test(req, &flag, &st);
		if (rc != MPI_SUCCESS || flag) dml_backoff_disarm(&b);
		if (rc != MPI_SUCCESS) return rc;
		if (flag) break;
		if (dml_backoff_pause(&b) == DML_TIMEOUT) return DML_TIMEOUT;
	}
	if (count == NULL) return MPI_SUCCESS; // a send, barrier or collective: no count
	dml_ring(st.MPI_SOURCE); // a large message's sender waits for the receive
	return MPI_Get_count(&st, MPI_FLOAT, count);
}

// dml_probe waits (with a deadline) for a byte message matching from/tag
// (MPI_ANY_SOURCE/MPI_ANY_TAG allowed) and reports its source, tag, size.
int dml_probe(int from, int tag, double timeout, int *src, int *gottag, int *count) {
	dml_backoff b;
	dml_backoff_init(&b, timeout);
	MPI_Status st;
	int flag = 0;
	if (from < 0) from = MPI_ANY_SOURCE;
	if (tag < 0) tag = MPI_ANY_TAG;
	for (;;) {
		dml_backoff_arm(&b);
		int rc = MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st);
		if (rc != MPI_SUCCESS || flag) dml_backoff_disarm(&b);
		if (rc != MPI_SUCCESS) return rc;
		if (flag) break;
		if (dml_backoff_pause(&b) == DML_TIMEOUT) return DML_TIMEOUT;
	}
	*src = st.MPI_SOURCE;
	*gottag = st.MPI_TAG;
	return MPI_Get_count(&st, MPI_BYTE, count);
}

int dml_recv_bytes(void *buf, int n, int from, int tag) {
	int rc = MPI_Recv(buf, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	dml_ring(from);
	return rc;
}

void dml_error_string(int code, char *out, int *len) {
	MPI_Error_string(code, out, len);
}

// dml_cancel cancels an outstanding request after a timeout and waits up to
// `timeout` seconds for the cancellation to complete. It returns 0 once the
// request is finished (MPI no longer touches its buffer), DML_TIMEOUT if it
// is still active.
int dml_cancel(MPI_Request *req, double timeout) {
	int rc = MPI_Cancel(req);
	if (rc != MPI_SUCCESS) return rc;
	dml_backoff b;
	dml_backoff_init(&b, timeout);
	int flag = 0;
	for (;;) {
		rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS) return rc;
		if (flag) return MPI_SUCCESS;
		if (dml_backoff_pause(&b) == DML_TIMEOUT) return DML_TIMEOUT;
	}
}
