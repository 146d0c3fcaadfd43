/* Comm lifetime: the listen/connect/accept handshake and closing. Every call
 * is made with the device lock held. */
#ifndef SRD_COMM_H
#define SRD_COMM_H

#include "srd/proto.h"

int srd_listen(struct srd_dev *dev, void *handle, struct srd_listener **out);
/* *out stays NULL until the listener answered; call again. */
int srd_connect(struct srd_dev *dev, void *handle, struct srd_comm **out);
int srd_accept(struct srd_listener *l, struct srd_comm **out);
void srd_close_listen(struct srd_listener *l);
/* Fail what is still open, wait (bounded) for operations the provider holds,
 * then free. A comm whose operations outlive the wait is retired: freed
 * when they complete or when the device closes. */
void srd_comm_close(struct srd_comm *c);

#endif
