// SPDX-License-Identifier: MIT
/*
 * Sealed memfds for client channels and regions. Sealing SHRINK|GROW|SEAL
 * means no client can ftruncate memory that roshmd has mapped, so a hostile
 * client can never make roshmd take a SIGBUS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "roshmd.h"

#define HUGE_2M (2ull << 20)

static int make(const char *name, size_t size, unsigned int flags)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

int rd_memfd_create(const char *name, size_t *size, enum rd_hugepages huge, bool *hugetlb)
{
	int fd = -ENOMEM;

	*hugetlb = false;
	if (huge != RD_HUGE_OFF) {
		size_t hsz = (*size + HUGE_2M - 1) & ~(HUGE_2M - 1);

		fd = make(name, hsz, MFD_HUGETLB);
		if (fd >= 0) {
			/* hugetlbfs reserves the pages of a shared mapping at
			 * mmap time and keeps them with the file: a trial map is
			 * the real check that the pages exist. */
			void *p = mmap(NULL, hsz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

			if (p == MAP_FAILED) {
				close(fd);
				fd = -ENOMEM;
				goto fallback;
			}
			munmap(p, hsz);
			*size = hsz;
			*hugetlb = true;
			return fd;
		}
fallback:
		if (huge == RD_HUGE_ON)
			return fd;
	}
	*size = (*size + 4095) & ~(size_t)4095;
	return make(name, *size, 0);
}
