/* SPDX-License-Identifier: MIT */
#ifndef ROSHM_INTERNAL_H
#define ROSHM_INTERNAL_H
#include <stddef.h>

/* One request/reply on a control socket; received fds land in fds[]. */
int roshm__ctl_call(int fd, void *req, size_t req_len, void *reply, size_t reply_max,
		    int *fds, int nfds_max, int *nfds);
int roshm__ctl_call_fd(int fd, void *req, size_t req_len, void *reply, size_t reply_max,
		       int *fds, int nfds_max, int *nfds, int fd_out);
#endif
