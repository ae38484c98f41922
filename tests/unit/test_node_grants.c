// SPDX-License-Identifier: MIT
/*
 * rd_node_granted (roshmd.h): the owner's check of a peer node's request
 * against the grants whose grantee lives on that node: the node, the
 * operations, the part's edges (an offset at its end, a length that would
 * wrap), the list's "any" flag, regions of other policies, no list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "roshmd.h"

static struct rd_node_grants *list(bool any, uint32_t n, const struct rd_node_grant *e)
{
	struct rd_node_grants *ng = malloc(sizeof(*ng) + n * sizeof(ng->e[0]));

	assert_non_null(ng);
	ng->any = any;
	ng->n = n;
	if (n)
		memcpy(ng->e, e, n * sizeof(*e));
	return ng;
}

static void test_hash(void **state)
{
	(void)state;
	assert_true(rd_node_hash("node1") != 0);
	assert_true(rd_node_hash("") != 0);
	assert_true(rd_node_hash("node1") == rd_node_hash("node1"));
	assert_true(rd_node_hash("node1") != rd_node_hash("node2"));
	assert_true(rd_node_hash("node1") != rd_node_hash("node10"));
}

static void test_policies(void **state)
{
	struct rd_region rg = { .policy = ROSHM_POLICY_GRANT, .data_size = 4096 };
	uint64_t n2 = rd_node_hash("node2");

	(void)state;
	/* a grant region nobody on another node was granted: nothing passes */
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_READ, 0, 8, false));
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 0, 0, true));
	/* other policies are the opener's roshmd's to check */
	rg.policy = 0;
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 0, 4096, false));
	rg.policy = ROSHM_POLICY_GRANT;
	rg.node_grants = list(true, 0, NULL);   /* a grant by an id of no known node */
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_ATOMIC, 8, 8, false));
	free(rg.node_grants);
	rg.node_grants = list(false, 0, NULL);  /* grants to our own node only */
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_READ, 0, 8, false));
	free(rg.node_grants);
}

static void test_parts(void **state)
{
	const struct rd_node_grant e[] = {
		{ rd_node_hash("node2"), 256, 320, ROSHM_ACCESS_WRITE },
		{ rd_node_hash("node2"), 0, 64, ROSHM_ACCESS_READ | ROSHM_ACCESS_ATOMIC },
		{ rd_node_hash("node3"), 0, 4096, ROSHM_ACCESS_ALL },
	};
	struct rd_region rg = { .policy = ROSHM_POLICY_GRANT, .data_size = 4096 };
	uint64_t n2 = rd_node_hash("node2"), n4 = rd_node_hash("node4");

	(void)state;
	rg.node_grants = list(false, 3, e);
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 256, 64, false));
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 300, 20, false));
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 320, 0, false));   /* at the end, empty */
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 256, 65, false)); /* one past */
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 255, 8, false));  /* one before */
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 300, UINT64_MAX - 200, false));
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, UINT64_MAX, 2, false));
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_READ, 256, 8, false));   /* not its operation */
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_ATOMIC, 8, 8, false));
	assert_false(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 0, 8, false));
	/* a transaction's raw accesses: any grant with the operation */
	assert_true(rd_node_granted(&rg, n2, ROSHM_ACCESS_WRITE, 0, 0, true));
	assert_false(rd_node_granted(&rg, n4, ROSHM_ACCESS_WRITE, 0, 0, true));
	/* node 3's whole grant is node 3's, not node 4's */
	assert_true(rd_node_granted(&rg, rd_node_hash("node3"), ROSHM_ACCESS_ALL, 0, 4096, false));
	assert_false(rd_node_granted(&rg, n4, ROSHM_ACCESS_READ, 0, 8, false));
	free(rg.node_grants);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash),
		cmocka_unit_test(test_policies),
		cmocka_unit_test(test_parts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
