// SPDX-License-Identifier: MIT
/* roshm_strerror: a description of every status the library and roshmd
 * return (roshm.h, the man pages), never the bare fallback. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "roshm.h"

/* Every -errno named in roshm.h and docs/man/roshm_*.3 */
static const int statuses[] = {
	EINVAL, EBADF, EFAULT, EOPNOTSUPP, ESTALE, ENOENT, EACCES, ECONNRESET, EHOSTUNREACH,
	ETIME, ETIMEDOUT, EIO, EAGAIN, EMSGSIZE, EEXIST, EMFILE, ENOSPC, EPROTO, EBUSY, EPERM,
	EDQUOT, ENOMEM, EINTR, ECONNREFUSED, ENAMETOOLONG,
};

static void test_every_status(void **st)
{
	(void)st;
	assert_string_equal(roshm_strerror(0), "success");
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		const char *d = roshm_strerror(-statuses[i]);

		assert_non_null(d);
		if (!strcmp(d, "error"))
			fail_msg("roshm_strerror(-%d) has no description", statuses[i]);
	}
	/* the two timeouts are told apart */
	assert_string_not_equal(roshm_strerror(-ETIME), roshm_strerror(-ETIMEDOUT));
}

static void test_not_an_errno(void **st)
{
	(void)st;
	assert_string_equal(roshm_strerror(1), "error");
	assert_string_equal(roshm_strerror(-100000), "error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_status),
		cmocka_unit_test(test_not_an_errno),
	};

	return cmocka_run_group_tests_name("strerror", tests, NULL, NULL);
}
