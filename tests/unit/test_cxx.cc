// SPDX-License-Identifier: MIT
// roshm.h from C++: the header compiles as C++ (g++ -std=c++17 -Wall -Wextra
// -Werror), its inline helpers work, and a C++ program links libroshm.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "roshm.h"

static int fails;

#define CHECK(c) do { if (!(c)) { std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

int main()
{
	struct roshm_sqe s;

	std::memset(&s, 0xff, sizeof(s));
	roshm_prep_write(&s, 3, 64, 128, 256);
	CHECK(s.opcode == ROSHM_OP_WRITE);
	CHECK(s.handle == 3 && s.off == 64 && s.arena_off == 128 && s.len == 256);
	roshm_prep_fetch_add(&s, 1, 8, 5);
	CHECK(s.opcode == ROSHM_OP_FETCH_ADD && s.operand1 == 5 && s.len == 8);
	roshm_sqe_set_data(&s, 42);
	CHECK(s.user_data == 42);
	// a function of the library itself, not only the header
	const char *e = roshm_strerror(-ESTALE);
	CHECK(e != nullptr && std::strlen(e) > 0);
	struct roshm_params p = {};
	int err = 0;
	p.sock_path = "/nonexistent/roshm.sock";
	struct roshm *r = roshm_open(&p, &err);
	CHECK(r == nullptr && err < 0);
	if (!fails)
		std::printf("test_cxx: roshm.h compiles and links as C++: OK\n");
	return fails ? 1 : 0;
}
