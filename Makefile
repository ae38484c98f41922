# roshm: thin wrapper over meson. Every target does its own prerequisites, so
# on a fresh Debian 12 machine `make demo` and `make test` alone work.
BUILD ?= build
MESON_TEST_ARGS ?=
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

# Debian 12 packages the build, the tests and the demo need.
DEPS := meson ninja-build gcc pkg-config libdpdk-dev dpdk-dev libconfig-dev \
        libcmocka-dev libjansson-dev libssl-dev libibverbs-dev librdmacm-dev \
        libcurl4-openssl-dev etcd-server curl redis-server redis-tools \
        iproute2 procps qemu-system-x86 busybox-static kmod cpio rdma-core \
        ibverbs-utils perftest qperf fio rdmacm-utils ucx-utils openmpi-bin netpipe-openmpi python3-mpi4py mpich libmpich-dev netpipe-mpich2 libfabric-bin \
        prometheus python3 python3-yaml \
        clang-14 libclang-rt-14-dev g++ gnuplot-nox gdb

.PHONY: all deps build test test-asan test-tsan fuzz demo bench bench-doc clean

all: build

deps:
	@scripts/deps.sh $(DEPS)

build: deps
	@if [ ! -f $(BUILD)/build.ninja ]; then meson setup $(BUILD); fi
	@ninja -C $(BUILD)

test: build
	@scripts/host-setup.sh
	@cd $(BUILD) && meson test --print-errorlogs --num-processes 1 $(MESON_TEST_ARGS)

# ASan + UBSan build of everything, the whole suite but the softroce VMs.
test-asan: deps
	@scripts/host-setup.sh
	@scripts/sanitize.sh asan $(ASAN_BUILD)

# ThreadSanitizer build, the tests that run a roshmd's control thread and
# poller together.
test-tsan: deps
	@scripts/host-setup.sh
	@scripts/sanitize.sh tsan $(TSAN_BUILD)

# libFuzzer: every target of tests/fuzz for FUZZ_SECONDS each (docs/testing.md, "make fuzz").
fuzz: deps
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

demo: build
	@scripts/host-setup.sh
	@scripts/demo.sh $(BUILD)

bench: build
	@scripts/host-setup.sh
	@perf/bench.sh $(BUILD)

# The last `make bench` run (its metrics, plots, date and commit) into
# docs/performance.md; the plots go to docs/bench/.
bench-doc:
	@python3 perf/results_table.py --doc $(BUILD)/bench-results.json docs/performance.md $(BUILD)/bench

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
