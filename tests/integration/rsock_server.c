// SPDX-License-Identifier: MIT
/*
 * An ordinary TCP server for check_rsockets.sh, with nothing of RDMA in
 * it: run under rdma-core's librspreload.so, its sockets are rsockets of
 * libroshm-verbs. (Debian's librspreload has no accept4, which Python's
 * accept uses: hence C here; the client is rsock_check.py.)
 *   rsock_server ADDR PORT
 * Takes one connection, waits in poll(2) before accept and each read, reads
 * to EOF with read(2), answers "BYTES SHA256HEX" with write(2), closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int wait_in(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, 60000);

	if (n != 1) {
		fprintf(stderr, "rsock_server: poll: %s\n", n ? "failed" : "timed out");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage sa = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;
	unsigned char md[EVP_MAX_MD_SIZE], buf[65536];
	unsigned int mdlen;
	unsigned long long total = 0;
	char ans[256];
	int one = 1, ls, c, n;
	EVP_MD_CTX *h;
	socklen_t len;

	if (argc != 3)
		return 2;
	if (inet_pton(AF_INET, argv[1], &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((unsigned short)atoi(argv[2]));
		len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, argv[1], &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((unsigned short)atoi(argv[2]));
		len = sizeof(*s6);
	} else {
		return 2;
	}
	ls = socket(sa.ss_family, SOCK_STREAM, 0);
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(ls, (struct sockaddr *)&sa, len) || listen(ls, 1)) {
		perror("rsock_server: listen");
		return 1;
	}
	if (wait_in(ls))
		return 1;
	c = accept(ls, NULL, NULL);
	if (c < 0) {
		perror("rsock_server: accept");
		return 1;
	}
	h = EVP_MD_CTX_new();
	if (!h || !EVP_DigestInit_ex(h, EVP_sha256(), NULL))
		return 1;
	for (;;) {
		if (wait_in(c))
			return 1;
		n = (int)read(c, buf, sizeof(buf));
		if (n < 0) {
			perror("rsock_server: read");
			return 1;
		}
		if (!n)
			break;
		EVP_DigestUpdate(h, buf, (size_t)n);
		total += (unsigned)n;
	}
	EVP_DigestFinal_ex(h, md, &mdlen);
	EVP_MD_CTX_free(h);
	n = snprintf(ans, sizeof(ans), "%llu ", total);
	for (unsigned int i = 0; i < mdlen; i++)
		n += snprintf(ans + n, sizeof(ans) - (size_t)n, "%02x", md[i]);
	if (write(c, ans, (size_t)n) != n) {
		perror("rsock_server: write");
		return 1;
	}
	close(c);
	close(ls);
	printf("rsock_server: read %llu bytes\n", total);
	return 0;
}
