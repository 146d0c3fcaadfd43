/* A ring allreduce (sum of floats) across 4 processes through the plugin API
 * alone: each rank listens, connects to the next rank and accepts from the
 * previous one, then runs reduce-scatter and allgather over the ring. Inputs
 * are small integers, so every sum is exact whatever the order of additions,
 * and the result is compared exactly. Uses ABI v8, as NCCL 2.20-2.27 do. */
#include <stdio.h>
#include <string.h>

#include "srdtest.h"

#define NRANKS 4
#define TIMEOUT_MS ST_HANG_MS
#define VERSION 8

/* 3 floats leave one rank an empty chunk (0-byte messages); the large count
 * gives uneven chunks over the clear-to-send path. */
static const size_t counts[] = {3, 1000, (1 << 20) + 3};
#define NCOUNTS (sizeof counts / sizeof counts[0])

static float input(int rank, size_t i) { return (float)(i % 1000) + 1000.0f * (float)rank; }
static float expected(size_t i) { return (float)NRANKS * (float)(i % 1000) + 1000.0f * (NRANKS * (NRANKS - 1) / 2); }

struct chunk {
  size_t off, len; /* in floats */
};

static struct chunk chunk_of(size_t count, int c) {
  size_t per = (count + NRANKS - 1) / NRANKS;
  size_t off = per * (size_t)c < count ? per * (size_t)c : count;
  size_t end = off + per < count ? off + per : count;
  return (struct chunk){off, end - off};
}

struct ring {
  void *send_comm, *recv_comm;
  void *send_mh_data, *recv_mh_data, *recv_mh_tmp;
  float *data, *tmp;
};

/* Send chunk `sc` of data to the next rank while receiving `rc_len` floats
 * from the previous one into `into`; both must finish. */
static void ring_step(struct ring *r, struct chunk sc, float *into, void *into_mh, size_t rc_len, int tag) {
  void *rreq = NULL, *sreq = NULL, *data = into;
  size_t rsize = rc_len * sizeof(float);
  ncclResult_t rc = ncclSuccess;
  enum st_wait w = st_irecv_wait(r->recv_comm, 1, &data, &rsize, &tag, &into_mh, &rreq, TIMEOUT_MS, &rc);
  ST_CHECK(w == ST_DONE, "step %d: irecv of %zu bytes: %s (rc %d)", tag, rsize,
           w == ST_TIMEOUT ? "never accepted" : "error", (int)rc);
  int64_t deadline = st_now_ms() + TIMEOUT_MS;
  int rdone = 0, sdone = 0, got = -1;
  while (!rdone || !sdone) {
    if (!sreq) ST_NCCL(st_net_isend(r->send_comm, r->data + sc.off, sc.len * sizeof(float), tag, r->send_mh_data, &sreq));
    if (sreq && !sdone) ST_NCCL(st_net_test(sreq, &sdone, NULL));
    if (!rdone) ST_NCCL(st_net_test(rreq, &rdone, &got));
    ST_CHECK(st_now_ms() < deadline, "step %d: send %s, receive %s after %d ms", tag,
             sdone ? "done" : sreq ? "pending" : "not accepted", rdone ? "done" : "pending", TIMEOUT_MS);
  }
  ST_CHECK(got >= 0 && (size_t)got == rsize, "step %d: received %d bytes, expected %zu", tag, got, rsize);
}

static int rank_main(int rank, int nranks, void *arg) {
  st_setup(arg, st_version(VERSION));
  int next = (rank + 1) % NRANKS, prev = (rank + NRANKS - 1) % NRANKS;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0}, next_handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lcomm = NULL;
  struct ring r;
  ST_NCCL(st_net_listen(0, handle, &lcomm));
  st_oob_send(prev, handle, sizeof handle);
  st_oob_recv(next, next_handle, sizeof next_handle, TIMEOUT_MS);
  st_connect_accept(0, next_handle, &r.send_comm, lcomm, &r.recv_comm, TIMEOUT_MS);
  ST_NCCL(st_net_close_listen(lcomm));

  size_t max_bytes = counts[NCOUNTS - 1] * sizeof(float);
  r.data = st_alloc(max_bytes);
  r.tmp = st_alloc(max_bytes);
  ST_NCCL(st_net_reg_mr(r.send_comm, r.data, max_bytes, &r.send_mh_data));
  ST_NCCL(st_net_reg_mr(r.recv_comm, r.data, max_bytes, &r.recv_mh_data));
  ST_NCCL(st_net_reg_mr(r.recv_comm, r.tmp, max_bytes, &r.recv_mh_tmp));

  int tag = 0;
  for (size_t k = 0; k < NCOUNTS; k++) {
    size_t count = counts[k];
    for (size_t i = 0; i < count; i++) r.data[i] = input(rank, i);
    /* Reduce-scatter: after step s, chunk (rank - s - 1) holds s + 2 inputs. */
    for (int s = 0; s < NRANKS - 1; s++) {
      struct chunk sch = chunk_of(count, (rank - s + NRANKS) % NRANKS);
      struct chunk rch = chunk_of(count, (rank - s - 1 + NRANKS) % NRANKS);
      ring_step(&r, sch, r.tmp, r.recv_mh_tmp, rch.len, tag++);
      for (size_t i = 0; i < rch.len; i++) r.data[rch.off + i] += r.tmp[i];
    }
    /* Allgather: rank owns the reduced chunk (rank + 1); pass chunks on. */
    for (int s = 0; s < NRANKS - 1; s++) {
      struct chunk sch = chunk_of(count, (rank + 1 - s + NRANKS) % NRANKS);
      struct chunk rch = chunk_of(count, (rank - s + NRANKS) % NRANKS);
      ring_step(&r, sch, r.data + rch.off, r.recv_mh_data, rch.len, tag++);
    }
    for (size_t i = 0; i < count; i++)
      ST_CHECK(r.data[i] == expected(i), "count %zu: element %zu is %g, expected %g", count, i, (double)r.data[i],
               (double)expected(i));
    st_barrier(TIMEOUT_MS);
  }

  ST_NCCL(st_net_dereg_mr(r.send_comm, r.send_mh_data));
  ST_NCCL(st_net_dereg_mr(r.recv_comm, r.recv_mh_data));
  ST_NCCL(st_net_dereg_mr(r.recv_comm, r.recv_mh_tmp));
  ST_NCCL(st_net_close_send(r.send_comm));
  ST_NCCL(st_net_close_recv(r.recv_comm));
  st_free(r.data, max_bytes);
  st_free(r.tmp, max_bytes);
  ST_NCCL(st_net_finalize());
  return 0;
}

static int ring_allreduce(const struct st_ctx *ctx) {
  char label[96];
  snprintf(label, sizeof label, "%s[%s]", ctx->test, ctx->provider);
  struct st_group_opts opts = {0}; /* the default alarm: a hang guard */
  return st_group_run(label, NRANKS, rank_main, (void *)ctx, &opts);
}

int main(int argc, char **argv) {
  static const struct st_case cases[] = {{"ring-allreduce", ring_allreduce}};
  return st_main(argc, argv, cases, 1);
}
