// The C half of the shim: see shim.go for why it exists.
#include <sched.h>
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
int dml_finalize(void) { return MPI_Finalize(); }
void dml_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
int dml_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

int dml_isend_f32(void *buf, int n, int to, int tag, MPI_Request *req) {
	return MPI_Isend(buf, n, MPI_FLOAT, to, tag, MPI_COMM_WORLD, req);
}
int dml_irecv_f32(void *buf, int n, int from, int tag, MPI_Request *req) {
	return MPI_Irecv(buf, n, MPI_FLOAT, from, tag, MPI_COMM_WORLD, req);
}
int dml_send_bytes(void *buf, int n, int to, int tag) {
	return MPI_Send(buf, n, MPI_BYTE, to, tag, MPI_COMM_WORLD);
}
int dml_allreduce_sum_f32(void *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

// dml_wait tests req until it completes or `timeout` seconds pass (then
// DML_TIMEOUT). It spins on MPI_Test, yielding the core after a while so
// that oversubscribed ranks (more ranks than cores) let each other run.
int dml_wait(MPI_Request *req, double timeout, int *count) {
	double deadline = MPI_Wtime() + timeout;
	MPI_Status st;
	int flag = 0;
	for (long spins = 0;; spins++) {
		int rc = MPI_Test(req, &flag, &st);
		if (rc != MPI_SUCCESS) return rc;
		if (flag) break;
		if ((spins & 1023) == 1023 && MPI_Wtime() > deadline) return DML_TIMEOUT;
		if (dml_yield && spins > 2000) sched_yield();
	}
	return MPI_Get_count(&st, MPI_FLOAT, count);
}

// dml_probe waits (with a deadline) for a byte message matching from/tag
// (MPI_ANY_SOURCE/MPI_ANY_TAG allowed) and reports its source, tag, size.
int dml_probe(int from, int tag, double timeout, int *src, int *gottag, int *count) {
	double deadline = MPI_Wtime() + timeout;
	MPI_Status st;
	int flag = 0;
	if (from < 0) from = MPI_ANY_SOURCE;
	if (tag < 0) tag = MPI_ANY_TAG;
	for (long spins = 0;; spins++) {
		int rc = MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st);
		if (rc != MPI_SUCCESS) return rc;
		if (flag) break;
		if ((spins & 1023) == 1023 && MPI_Wtime() > deadline) return DML_TIMEOUT;
		if (dml_yield && spins > 2000) sched_yield();
	}
	*src = st.MPI_SOURCE;
	*gottag = st.MPI_TAG;
	return MPI_Get_count(&st, MPI_BYTE, count);
}

int dml_recv_bytes(void *buf, int n, int from, int tag) {
	return MPI_Recv(buf, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
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
	double deadline = MPI_Wtime() + timeout;
	int flag = 0;
	while (!flag) {
		rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS) return rc;
		if (!flag && MPI_Wtime() > deadline) return DML_TIMEOUT;
		if (!flag) sched_yield();
	}
	return MPI_SUCCESS;
}
