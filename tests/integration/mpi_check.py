#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""MPI through libroshm-verbs: two ranks of Debian's Open MPI (pml ucx and
osc ucx, so UCX's rc_verbs / ud_verbs on roshm0), each on its own roshmd
node (check_verbs_mpi.sh). The MPI library and UCX are unmodified; this
script only drives them and checks every byte and value that comes back:
  - two-sided: Sendrecv of 8 B to 4 MiB (eager and rendezvous), both ways;
  - one-sided on an MPI window: Put, Get, Accumulate(SUM), Fetch_and_op(SUM)
    from both ranks at once on one counter (every fetched value distinct,
    the sum exact), Compare_and_swap, with fences and passive-target locks.
Exit 0 and a last line "mpi_check: ok" on rank 0, else a message and 1."""
import array
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
peer = 1 - rank


def fail(msg):
    print(f"mpi_check rank {rank}: FAIL: {msg}", flush=True)
    comm.Abort(1)


def pattern(n, seed):
    return bytes(((i * 131 + seed * 7 + (i >> 8)) & 0xFF) for i in range(n))


if comm.Get_size() != 2:
    fail(f"want 2 ranks, have {comm.Get_size()}")

# two-sided, both ways at once, eager to rendezvous sizes
for n in (8, 1000, 8192, 65536, 1 << 20, 4 << 20):
    out = pattern(n, rank + n)
    got = bytearray(n)
    comm.Sendrecv([out, MPI.BYTE], dest=peer, sendtag=n & 0x7FFF,
                  recvbuf=[got, MPI.BYTE], source=peer, recvtag=n & 0x7FFF)
    if bytes(got) != pattern(n, peer + n):
        bad = next(i for i in range(n) if got[i] != pattern(n, peer + n)[i])
        fail(f"Sendrecv of {n} bytes: byte {bad} differs")
if rank == 0:
    print("mpi_check: Sendrecv 8 B .. 4 MiB both ways: bytes right", flush=True)

# one-sided
WIN = 1 << 20
win = MPI.Win.Allocate(WIN, disp_unit=1, comm=comm)
mem = memoryview(win.tomemory()).cast('B')
mem[:] = bytes(WIN)
comm.Barrier()

# Put 256 KiB into the peer's window at an odd offset, then Get it back
n, off = 256 * 1024, 4099
src = pattern(n, rank + 40)   # an origin buffer must live until the epoch ends
win.Fence()
win.Put([src, MPI.BYTE], peer, target=(off, n, MPI.BYTE))
win.Fence()
want = pattern(n, peer + 40)
if bytes(mem[off:off + n]) != want:
    bad = [i for i in range(n) if mem[off + i] != want[i]]
    fail(f"Put: {len(bad)} bytes of {n} differ from what the peer put, first at {bad[0]}, "
         f"last at {bad[-1]}; {sum(1 for i in bad if mem[off + i] == 0)} of them zero")
if any(mem[:off]) or any(mem[off + n:off + n + 4096]):
    fail("Put: bytes outside the target range changed")
back = bytearray(n)
win.Fence()
win.Get([back, MPI.BYTE], peer, target=(off, n, MPI.BYTE))
win.Fence()
if bytes(back) != pattern(n, rank + 40):
    fail("Get: not what this rank put there")
if rank == 0:
    print("mpi_check: Put and Get of 256 KiB at an odd offset: bytes right", flush=True)

# atomics on 8-byte words at offset 0 of rank 0's window
CTR, ACC, CAS = 0, 8, 16
win.Fence()
mem[:64] = bytes(64)
comm.Barrier()
win.Fence()
K = 300
seen = array.array('q')
one = array.array('q', [1])
res = array.array('q', [0])
inc = array.array('q', [rank + 1])
win.Lock(0, MPI.LOCK_SHARED)
for _ in range(K):
    win.Fetch_and_op([one, MPI.INT64_T], [res, MPI.INT64_T], 0, CTR, MPI.SUM)
    win.Flush(0)
    seen.append(res[0])
    win.Accumulate([inc, MPI.INT64_T], 0, target=(ACC, 1, MPI.INT64_T), op=MPI.SUM)
win.Unlock(0)
allseen = comm.gather(list(seen), root=0)
comm.Barrier()
if rank == 0:
    win.Lock(0, MPI.LOCK_SHARED)
    final = array.array('q', [0, 0])
    win.Get([final, MPI.INT64_T], 0, target=(CTR, 2, MPI.INT64_T))
    win.Unlock(0)
    vals = sorted(allseen[0] + allseen[1])
    if vals != list(range(2 * K)):
        fail(f"Fetch_and_op: fetched values are not 0..{2 * K - 1} once each")
    if final[0] != 2 * K or final[1] != K * 3:
        fail(f"counter {final[0]} (want {2 * K}), accumulated {final[1]} (want {3 * K})")
    print(f"mpi_check: {2 * K} Fetch_and_op from both ranks: each value once, sum exact; "
          f"Accumulate exact", flush=True)

# Compare_and_swap: both ranks try to claim one word; exactly one wins
comm.Barrier()
claim = array.array('q', [100 + rank])
cmp_ = array.array('q', [0])
old = array.array('q', [-1])
win.Lock(0, MPI.LOCK_SHARED)
win.Compare_and_swap([claim, MPI.INT64_T], [cmp_, MPI.INT64_T], [old, MPI.INT64_T], 0, CAS)
win.Unlock(0)
olds = comm.gather(old[0], root=0)
comm.Barrier()
if rank == 0:
    win.Lock(0, MPI.LOCK_SHARED)
    word = array.array('q', [0])
    win.Get([word, MPI.INT64_T], 0, target=(CAS, 1, MPI.INT64_T))
    win.Unlock(0)
    winners = [r for r in (0, 1) if olds[r] == 0]
    if len(winners) != 1 or word[0] != 100 + winners[0] or olds[1 - winners[0]] != word[0]:
        fail(f"Compare_and_swap: olds {olds}, word {word[0]}")
    print(f"mpi_check: Compare_and_swap: rank {winners[0]} won, the other saw its value", flush=True)

win.Free()
comm.Barrier()
if rank == 0:
    print("mpi_check: ok", flush=True)
sys.exit(0)
