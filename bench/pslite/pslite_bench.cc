// pslite_bench: ps-lite's push/pull round trips per worker, measured the
// way `dml bench ps` measures dml's (see README.md beside this file).
//
// Environment (besides ps-lite's DMLC_* variables, set by run.sh):
//   PSB_MODE   dense | sparse
//   PSB_N      dense: floats per push and pull; sparse: model size
//   PSB_K      sparse: random keys per round trip
//   PSB_ITERS  timed round trips (after PSB_WARMUP untimed ones)
//   PSB_FUSED  1: one PushPull request per round trip
//
// Dense pushes one key carrying PSB_N values (lens = {N}), as MXNet sends a
// tensor; sparse pushes PSB_K keys of one value each. The server applies
// SGD (w -= 0.01 g) and answers pulls with the weights, like dml's server.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <algorithm>
#include <set>
#include <mutex>
#include <sys/resource.h>
#include "ps/ps.h"

using namespace ps;

static int env(const char* k, int def) {
  const char* v = getenv(k);
  return v ? atoi(v) : def;
}

static bool dense_mode() {
  const char* m = getenv("PSB_MODE");
  return !m || std::string(m) == "dense";
}

static double cpu_seconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

struct Store {
  std::vector<float> dense;   // dense: the one key's values
  std::vector<float> sparse;  // sparse: value per key
};
static Store store;
static double server_cpu0 = -1;
static std::chrono::high_resolution_clock::time_point server_t0;

void Handle(const KVMeta& meta, const KVPairs<float>& req, KVServer<float>* server) {
  if (server_cpu0 < 0) { server_cpu0 = cpu_seconds(); server_t0 = std::chrono::high_resolution_clock::now(); }
  KVPairs<float> res;
  if (dense_mode()) {
    size_t n = req.lens.size() ? req.lens[0] : req.vals.size();
    if (meta.push) {
      if (n == 0) n = req.vals.size();
      if (store.dense.size() != n) store.dense.assign(n, 0);
      float* w = store.dense.data();
      const float* g = req.vals.data();
      for (size_t i = 0; i < n; ++i) w[i] -= 0.01f * g[i];
    }
    if (meta.pull) {
      res.keys = req.keys;
      res.vals = SArray<float>(store.dense.data(), store.dense.size(), false);  // zero-copy view
      res.lens.push_back(store.dense.size());
    }
  } else {
    size_t nk = req.keys.size();
    if (meta.push) {
      for (size_t i = 0; i < nk; ++i) store.sparse[req.keys[i]] -= 0.01f * req.vals[i];
    }
    if (meta.pull) {
      res.keys = req.keys;
      res.vals.resize(nk);
      for (size_t i = 0; i < nk; ++i) res.vals[i] = store.sparse[req.keys[i]];
    }
  }
  server->Response(meta, res);
}

void StartServer() {
  if (!IsServer()) return;
  store.sparse.assign(dense_mode() ? 0 : env("PSB_N", 1000000), 0);
  auto server = new KVServer<float>(0);
  server->set_request_handle(Handle);
  RegisterExitCallback([server]() {
    double wall = std::chrono::duration<double>(std::chrono::high_resolution_clock::now() - server_t0).count();
    printf("pslite server cpu %.2f cores\n", (cpu_seconds() - server_cpu0) / wall);
    fflush(stdout);
    delete server;
  });
}

void RunWorker() {
  if (!IsWorker()) return;
  KVWorker<float> kv(0, 0);
  int iters = env("PSB_ITERS", 200), warm = env("PSB_WARMUP", 10), fused = env("PSB_FUSED", 0);
  int n = env("PSB_N", 235146), k = env("PSB_K", 5000);
  std::vector<SArray<Key>> keysets;
  SArray<int> lens;
  size_t nv;
  if (dense_mode()) {
    SArray<Key> keys(1);
    keys[0] = 0;
    keysets.push_back(keys);
    lens.push_back(n);
    nv = n;
  } else {
    std::mt19937_64 rng(MyRank() + 7);
    for (int s = 0; s < 16; ++s) {
      std::set<Key> set;
      while ((int)set.size() < k) set.insert(rng() % n);
      SArray<Key> keys(k);
      std::copy(set.begin(), set.end(), keys.begin());
      keysets.push_back(keys);
    }
    nv = k;
  }
  SArray<float> grad(nv), out(nv);
  for (size_t i = 0; i < nv; ++i) grad[i] = ((i * 7919) % 1000) * 2e-6f;
  SArray<int> outlens;
  std::chrono::high_resolution_clock::time_point t0;
  double cpu0 = 0;
  for (int it = -warm; it < iters; ++it) {
    if (it == 0) { t0 = std::chrono::high_resolution_clock::now(); cpu0 = cpu_seconds(); }
    const SArray<Key>& keys = keysets[(it + warm) % keysets.size()];
    const SArray<int>& l = dense_mode() ? lens : SArray<int>();
    if (fused) {
      kv.Wait(kv.ZPushPull(keys, grad, &out, dense_mode() ? &outlens : nullptr));
    } else {
      kv.Wait(kv.ZPush(keys, grad, l));
      kv.Wait(kv.ZPull(keys, &out, dense_mode() ? &outlens : nullptr));
    }
  }
  double sec = std::chrono::duration<double>(std::chrono::high_resolution_clock::now() - t0).count();
  printf("pslite worker %d mode %s n %d k %d fused %d: %.1f round trips/s, cpu %.2f cores\n", MyRank(),
         dense_mode() ? "dense" : "sparse", n, k, fused, iters / sec, (cpu_seconds() - cpu0) / sec);
  fflush(stdout);
}

int main(int argc, char* argv[]) {
  Start(0);
  StartServer();
  RunWorker();
  Finalize(0, true);
  return 0;
}
