// Declarations of shim.c, shared by the Go files of package mpi.
#ifndef DML_SHIM_H
#define DML_SHIM_H
#include <mpi.h>

#define DML_TIMEOUT (-1)

extern int dml_yield;

// A node-local rank's doorbell (shim.c): one cache line each.
typedef struct {
	unsigned seq, sleepers;
	char pad[56];
} dml_bell;
extern dml_bell *dml_bells;
extern int dml_nbells, dml_me;
void dml_ring(int r);
extern long long dml_spin_ns, dml_yield_ns, dml_sleep_min_ns, dml_sleep_max_ns, dml_sleep_long_ns;

int dml_online_cpus(void);
int dml_init(int multiple, int *provided);
int dml_rank(int *r);
int dml_size(int *n);
int dml_tag_ub(void);
int dml_finalize(void);
void dml_abort(int code);
int dml_ibarrier(MPI_Request *req);
int dml_isend_f32(void *buf, int n, int to, int tag, MPI_Request *req);
int dml_irecv_f32(void *buf, int n, int from, int tag, MPI_Request *req);
int dml_isend_bytes(void *buf, int n, int to, int tag, MPI_Request *req);
int dml_allreduce_sum_f32(void *buf, int n);
int dml_iallgather_bytes(void *send, int n, void *recv, MPI_Request *req);
int dml_wait(MPI_Request *req, double timeout, int *count);
int dml_probe(int from, int tag, double timeout, int *src, int *gottag, int *count);
int dml_recv_bytes(void *buf, int n, int from, int tag);
int dml_cancel(MPI_Request *req, double timeout);
void dml_error_string(int code, char *out, int *len);

#endif
