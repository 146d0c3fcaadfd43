/* One error vocabulary inside the plugin. Only the facade (src/comm/net.c)
 * translates it to ncclResult_t; libfabric's -FI_* codes stop at the layer
 * that called libfabric. SRD_AGAIN is the one "try later": nothing happened,
 * call again (NCCL sees success with no comm or request). */
#ifndef SRD_ERR_H
#define SRD_ERR_H

enum srd_err {
  SRD_OK = 0,
  SRD_AGAIN,        /* nothing done yet: call again */
  SRD_ERR_ARG,      /* a bad argument from the caller */
  SRD_ERR_USAGE,    /* a call the protocol does not allow (a message larger than its buffer) */
  SRD_ERR_SYSTEM,   /* the host or the provider failed: memory, posting, a device that does not open */
  SRD_ERR_REMOTE,   /* the peer failed, closed or went away */
  SRD_ERR_INTERNAL, /* a limit of ours was reached */
};

#endif
