/* ncclTunerPlugin_v2..v6: thin shims from each ABI version to the one tuner
 * (plugin.c). The only symbols the library exports. */
#include <stddef.h>

#include "nccl/tuner.h"
#include "srd/log.h"
#include "srd/tuner.h"

#define EXPORT __attribute__((visibility("default")))
#define TUNER_NAME "SRD"

_Static_assert(SRD_ALGO_TREE == NCCL_ALGO_TREE && SRD_ALGO_RING == NCCL_ALGO_RING && SRD_ALGO_PAT == NCCL_ALGO_PAT &&
                   SRD_ALGO_COUNT == NCCL_NUM_ALGORITHMS,
               "algorithm indexes follow NCCL's cost table");
_Static_assert(SRD_PROTO_LL == NCCL_PROTO_LL && SRD_PROTO_LL128 == NCCL_PROTO_LL128 &&
                   SRD_PROTO_SIMPLE == NCCL_PROTO_SIMPLE && SRD_PROTO_COUNT == NCCL_NUM_PROTOCOLS,
               "protocol indexes follow NCCL's cost table");
_Static_assert(SRD_COLL_ALLREDUCE == (int)ncclFuncAllReduce && SRD_COLL_BROADCAST == (int)ncclFuncBroadcast &&
                   SRD_COLL_REDUCESCATTER == (int)ncclFuncReduceScatter,
               "collective numbers follow ncclFunc_t");

/* A tuner that cannot allocate leaves NCCL alone rather than failing the
 * communicator: every entry point accepts a NULL context. */
static ncclResult_t create(void **context, size_t nranks, size_t nnodes, int nvl_domains, ncclDebugLogger_t logger) {
  if (logger) srd_log_set_logger(logger);
  *context = srd_tuner_create(nranks, nnodes, nvl_domains, NULL);
  if (!*context) SRD_WARN("tuner: out of memory; NCCL keeps its own choices");
  return ncclSuccess;
}

static ncclResult_t destroy(void *context) {
  srd_tuner_destroy(context);
  return ncclSuccess;
}

/* v3..v6 share the cost-table form. getCollInfo must always succeed: an error
 * would fail the collective. */
static ncclResult_t table_coll_info(void *context, ncclFunc_t coll, size_t nbytes, int npipe, float **table,
                                    int num_algo, int num_proto, int *nchannels) {
  if (!table || num_algo <= 0 || num_proto <= 0) return ncclSuccess;
  struct srd_tuner_request rq = {(int)coll, nbytes, npipe, (float *)table, num_algo, num_proto, 0};
  struct srd_tuner_decision d;
  srd_tuner_decide(context, &rq, &d);
  if (d.channels > 0 && nchannels) *nchannels = d.channels;
  return ncclSuccess;
}

/* ---- v2: the plugin names the winner; NCCL edits its table itself. */
static ncclResult_t v2_init(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **context) {
  return create(context, nranks, nnodes, 0, logger);
}

static ncclResult_t v2_coll_info(void *context, ncclFunc_t coll, size_t nbytes, int collnet, int nvls, int npipe,
                                 int *algorithm, int *protocol, int *nchannels) {
  struct srd_tuner_request rq = {(int)coll, nbytes, npipe, NULL, 0, 0, collnet || nvls};
  struct srd_tuner_decision d;
  srd_tuner_decide(context, &rq, &d);
  if (d.algo >= 0 && algorithm && protocol) {
    *algorithm = d.algo;
    *protocol = d.proto;
  }
  if (d.channels > 0 && nchannels) *nchannels = d.channels;
  return ncclSuccess;
}

EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {TUNER_NAME, v2_init, v2_coll_info, destroy};

/* ---- v3: cost table. */
static ncclResult_t v3_coll_info(void *context, ncclFunc_t coll, size_t nbytes, int npipe, float **table,
                                 int num_algo, int num_proto, int *nchannels) {
  return table_coll_info(context, coll, nbytes, npipe, table, num_algo, num_proto, nchannels);
}

EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {TUNER_NAME, v2_init, v3_coll_info, destroy};

/* ---- v4: plus regBuff, which the model does not need. */
static ncclResult_t v4_coll_info(void *context, ncclFunc_t coll, size_t nbytes, int npipe, float **table,
                                 int num_algo, int num_proto, int reg_buff, int *nchannels) {
  (void)reg_buff;
  return table_coll_info(context, coll, nbytes, npipe, table, num_algo, num_proto, nchannels);
}

EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {TUNER_NAME, v2_init, v4_coll_info, destroy};

/* ---- v5: init gets the NVLink domains; NCCL's constants stay as they are
 * (they steer NCCL's model, which the cost table already reflects). */
static ncclResult_t v5_init(void **context, uint64_t comm_id, size_t nranks, size_t nnodes, ncclDebugLogger_t logger,
                            ncclNvlDomainInfo_v5_t *nvl, ncclTunerConstants_v5_t *constants) {
  (void)comm_id;
  (void)constants;
  return create(context, nranks, nnodes, nvl ? nvl->nNvlDomains : 0, logger);
}

EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {TUNER_NAME, v5_init, v4_coll_info, destroy};

/* ---- v6: plus the chunk size. */
static ncclResult_t v6_chunk_size(void *context, ncclFunc_t coll, size_t nbytes, int algo, int proto, int nchannels,
                                  size_t *chunk) {
  (void)nchannels;
  srd_tuner_chunk(context, (int)coll, nbytes, algo, proto, chunk);
  return ncclSuccess;
}

EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {TUNER_NAME, v5_init, v4_coll_info, destroy, v6_chunk_size};
