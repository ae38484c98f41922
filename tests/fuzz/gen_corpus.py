#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the seed corpus of every fuzz target into corpus/<target>/: valid
# messages as roshm builds them (layouts from client-lib/include/roshm/*.h)
# and a few near-valid ones, each one field or one byte off. The files are
# committed; run this again only when a wire format changes:
#   tests/fuzz/gen_corpus.py            (from anywhere)
import json, os, shutil, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.dirname(os.path.dirname(here))


def put(target, name, data):
    d = os.path.join(here, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- sqe: struct roshm_sqe (64 bytes), then an optional arena selector ----
NOP, WRITE, READ, FADD, CAS, TXW, TXC, FENCE = range(8)


def sqe(op, handle=0, off=0, arena_off=0, ln=0, flags=0, op1=0, op2=0, ud=0x1234,
        r0=0, r1=0, r2=0):
    return struct.pack('<BBHIQQIIQQQQ', op, flags, r0, handle, off, arena_off, ln, r1, op1, op2, ud, r2)


def h(idx, gen):
    return idx | gen << 16


H4K, HTXN, HTINY, HDEAD, HCLOSED, HEMPTY, HHUGE = h(1, 1), h(2, 2), h(3, 0xffff), h(4, 0), h(5, 7), h(6, 3), h(7, 9)
sqes = {
    'nop': sqe(NOP), 'fence': sqe(FENCE), 'fence_flag_write': sqe(WRITE, H4K, 0, 0, 64, flags=1),
    'write_4k': sqe(WRITE, H4K, 0, 0, 4096), 'read_last_byte': sqe(READ, H4K, 4095, 65535, 1),
    'write_empty_at_end': sqe(WRITE, H4K, 4096, 0, 0),
    'fetch_add': sqe(FADD, H4K, 4088, 0, 8, op1=1), 'cmp_swap': sqe(CAS, HTXN, 0, 0, 8, op1=1, op2=2),
    'txn_write': sqe(TXW, HTXN, 1000, 0, 100), 'txn_commit': sqe(TXC, HTXN),
    'txn_tiny': sqe(TXW, HTINY, 0, 0, 8), 'huge_region_top': sqe(WRITE, HHUGE, 2**64 - 16, 0, 8),
    # near-valid
    'write_one_past': sqe(WRITE, H4K, 4089, 0, 8), 'read_arena_past': sqe(READ, H4K, 0, 65535, 2),
    'off_wraps': sqe(WRITE, H4K, 2**64 - 1, 0, 2), 'arena_wraps': sqe(READ, H4K, 0, 2**64 - 4, 8),
    'fadd_misaligned': sqe(FADD, H4K, 4, 0, 8), 'fadd_len4': sqe(FADD, H4K, 0, 0, 4),
    'cas_past_end': sqe(CAS, H4K, 4096, 0, 8), 'stale_gen': sqe(WRITE, h(1, 2), 0, 0, 8),
    'dead_region': sqe(READ, HDEAD, 0, 0, 8), 'closed_handle': sqe(READ, HCLOSED, 0, 0, 8),
    'handle_out_of_table': sqe(READ, h(200, 0), 0, 0, 8), 'empty_region': sqe(READ, HEMPTY, 0, 0, 1),
    'txn_no_log': sqe(TXW, H4K, 0, 0, 8), 'commit_no_log': sqe(TXC, H4K),
    'rsvd0': sqe(NOP, r0=1), 'rsvd1': sqe(WRITE, H4K, 0, 0, 8, r1=1), 'rsvd2': sqe(READ, H4K, r2=1),
    'bad_flag': sqe(WRITE, H4K, 0, 0, 8, flags=2), 'opcode_max': sqe(8), 'opcode_255': sqe(255),
}
for name, s in sqes.items():
    put('sqe', name, s)
put('sqe', 'write_arena_0', sqe(WRITE, H4K, 0, 0, 1) + b'\x01')
put('sqe', 'read_arena_4m', sqe(READ, HTXN, 0, (4 << 20) - 1, 1) + b'\x03')
put('sqe', 'write_arena_max', sqe(WRITE, HHUGE, 0, 2**64 - 9, 8) + b'\x04')

# ---- record: registry JSON as rd_region_rec_to_json writes it ----
def dump(o):
    return json.dumps(o, separators=(',', ':'), sort_keys=True)


region = {'node': 'node-a', 'tenant': 'default', 'name': 'board', 'state': 'active',
          'endpoint': 'tcp:198.18.0.1:7471', 'region_id': 3, 'key': 2882400001,
          'epoch': '10101741285430128617', 'mem_id': '77', 'data_size': '65536',
          'txn_slots': 0, 'slot_size': 0, 'policy': 'tenant', 'tenants': []}
put('record', 'region_tcp', dump(region))
put('record', 'region_verbs', dump(dict(region, endpoint='verbs:198.18.1.1:7472', rkey=4660,
                                        raddr='140737354129408', txn_slots=16, slot_size=4096)))
put('record', 'region_list_policy', dump(dict(region, policy='list', tenants=['team-a', 'team_b', 'c.d'])))
put('record', 'region_owner_stale', dump(dict(region, policy='owner', state='stale', endpoint='')))
put('record', 'region_max_values', dump(dict(region, epoch='18446744073709551615', key=4294967295,
                                             data_size='18446744073709551615')))
put('record', 'node', dump({'node': 'node-a', 'endpoint': 'tcp:198.18.0.1:7471', 'pid': 4242}))
put('record', 'node_no_transport', dump({'node': 'n1', 'endpoint': '', 'pid': 1}))
# near-valid
put('record', 'region_epoch_overflow', dump(dict(region, epoch='18446744073709551616')))
put('record', 'region_epoch_negative', dump(dict(region, epoch='-1')))
put('record', 'region_epoch_number', dump(dict(region, epoch=5)))
put('record', 'region_key_too_big', dump(dict(region, key=4294967296)))
put('record', 'region_bad_name', dump(dict(region, name='../etc')))
put('record', 'region_bad_state', dump(dict(region, state='gone')))
put('record', 'region_verbs_no_rkey', dump(dict(region, endpoint='verbs:198.18.1.1:7472')))
put('record', 'region_nine_tenants', dump(dict(region, policy='list', tenants=['t%d' % i for i in range(9)])))
put('record', 'region_missing_policy', dump({k: v for k, v in region.items() if k != 'policy'}))
put('record', 'region_duplicate_key', dump(region)[:-1] + ',"node":"other"}')
put('record', 'region_nul_escape', dump(region).replace('"board"', '"bo\\u0000ard"'))
put('record', 'node_pid_negative', dump({'node': 'n1', 'endpoint': '', 'pid': -1}))
put('record', 'not_an_object', '["node","n1"]')
put('record', 'truncated', dump(region)[:40])

# ---- config: the shipped configs, small ones, and environments ----
for rel, name in (('config/roshmd.conf', 'sample'), ('config/local-demo/node-a.conf', 'demo_node_a')):
    with open(os.path.join(src, rel), 'rb') as f:
        put('config', name, f.read())
put('config', 'tcp_env', 'node = "n1";\ntransport: { tcp: { enabled = true; port = 7471; }; };\n'
    '\0ROSHM_NODE=worker-7\nROSHM_ADVERTISE=10.1.2.3\nPATH=/bin')
put('config', 'verbs_vf', 'transport: { verbs: { enabled = true; qps_per_peer = 2; }; };\n'
    '\0PCIDEVICE_NVIDIA_COM_ROCE_VF=0000:3b:02.1\nROSHM_NODE=w1')
put('config', 'verbs_vf_list', 'transport: { verbs: { enabled = true; }; };\n'
    '\0PCIDEVICE_X=0000:3b:02.1,0000:3b:02.2')
put('config', 'verbs_vf_missing', 'transport: { verbs: { enabled = true; }; };\n\0PCIDEVICE_X=0000:3b:02.2')
put('config', 'tenants_admin', 'tenants = ( { name = "default"; token = "t0k"; }, { name = "b"; token = "x"; } );\n'
    'admin: { uids = [ 0, 1000 ]; };\n')
put('config', 'etcd', 'registry: { backend = "etcd"; endpoints = "http://127.0.0.1:2379"; lease_ttl = 2; };\n')
put('config', 'eal_args', 'eal = [ "--no-huge", "-m", "128", "--file-prefix", "x" ];\n'
    'dataplane: { lcore = 1; idle = "busy"; burst = 4; };\n')
# near-valid
put('config', 'burst_zero', 'node = "x";\ndataplane: {\n  burst = 0;\n};\n')
put('config', 'unknown_key', 'colour = "blue";\n')
put('config', 'wrong_type', 'dataplane: { burst = "32"; };\n')
put('config', 'bad_node', 'node = "a/b";\n')
put('config', 'syntax_error', 'node = "x"\ndataplane: { burst = ; };\n')
put('config', 'sq_not_pow2', 'channel: { sq_entries = 100; };\n')
put('config', 'env_bad_node', 'node = "n";\n\0ROSHM_NODE=a/b')
put('config', 'env_bad_advertise', 'node = "n";\n\0ROSHM_ADVERTISE=node-1')
put('config', 'int64_huge', 'channel: { arena_size = 9223372036854775807L; };\n')

# ---- tcp_handshake: control byte, then hello1 (104), hello3 (40), frames ----
TCP_MAGIC = 0x50435452


def hello1(node=b'node-r', magic=TCP_MAGIC, version=1, nonce=bytes(range(32))):
    return struct.pack('<II32s64s', magic, version, nonce, node)


def hello3(magic=TCP_MAGIC, version=1, mac=b'\0' * 32):
    return struct.pack('<II32s', magic, version, mac)


def ctl(sign, eof, chunk):
    return bytes([(1 if sign else 0) | (2 if eof else 0) | ((chunk - 1) << 2)])


frame = struct.pack('<BBHIIIQQQQQ', WRITE, 0, 0, 8, 1, 0xabad1dea, 7, 0, 0, 0, 99) + b'payload!'
put('tcp_handshake', 'signed_whole', ctl(1, 0, 64) + hello1() + hello3())
put('tcp_handshake', 'signed_then_frame', ctl(1, 0, 64) + hello1() + hello3() + frame)
put('tcp_handshake', 'signed_bytewise', ctl(1, 1, 1) + hello1(b'n' * 63) + hello3() + frame)
put('tcp_handshake', 'signed_chunk7_eof', ctl(1, 1, 7) + hello1(b'node.r_1') + hello3())
put('tcp_handshake', 'unsigned_mac', ctl(0, 0, 64) + hello1() + hello3(mac=b'\x55' * 32))
put('tcp_handshake', 'hello1_only', ctl(0, 0, 13) + hello1())
put('tcp_handshake', 'hello1_eof', ctl(0, 1, 64) + hello1())
put('tcp_handshake', 'short_eof', ctl(0, 1, 5) + hello1()[:50])
put('tcp_handshake', 'bad_magic', ctl(1, 0, 64) + hello1(magic=0x50435453) + hello3())
put('tcp_handshake', 'bad_version', ctl(1, 0, 64) + hello1(version=2) + hello3())
put('tcp_handshake', 'node_unterminated', ctl(1, 0, 64) + hello1()[:40] + b'x' * 64 + hello3())
put('tcp_handshake', 'node_slash', ctl(1, 0, 64) + hello1(b'a/b') + hello3())
put('tcp_handshake', 'node_empty', ctl(1, 0, 64) + hello1(b'') + hello3())
put('tcp_handshake', 'hello3_bad_magic', ctl(1, 0, 64) + hello1() + hello3(magic=0))
put('tcp_handshake', 'hello3_bad_version', ctl(1, 0, 3) + hello1() + hello3(version=0))

# ---- verbs_cm: where byte (0 request, 1 reject), then the private data ----
VERBS_MAGIC = 0x53425652
HELLO, CHALLENGE, PROOF, DENIED = 1, 2, 3, 4


def vhello(node=b'node-r', kind=HELLO, version=1, qp=0, magic=VERBS_MAGIC):
    return struct.pack('<IBBH16s32s', magic, kind, version, qp, bytes(range(16)), node)


def vchal(node=b'node-s', kind=CHALLENGE, rsvd=0):
    return struct.pack('<IBBH16s64s32s', VERBS_MAGIC, kind, 1, rsvd, bytes(range(16, 32)), node, b'\x77' * 32)


def vproof(qp=1):
    return struct.pack('<IBBH16s32s', VERBS_MAGIC, PROOF, 1, qp, bytes(range(16, 32)), b'\x11' * 32)


denied = struct.pack('<IBBH', VERBS_MAGIC, DENIED, 1, 0) + bytes(112)
put('verbs_cm', 'hello', b'\0' + vhello())
put('verbs_cm', 'hello_qp3_31chars', b'\0' + vhello(b'abcdefghij-abcdefghij-abcdefghi', qp=3))
put('verbs_cm', 'proof', b'\0' + vproof())
put('verbs_cm', 'challenge', b'\1' + vchal())
put('verbs_cm', 'challenge_rej_area', b'\1' + vchal() + bytes(28))
put('verbs_cm', 'denied', b'\1' + denied)
put('verbs_cm', 'hello_req_area', b'\0' + vhello() + bytes(36))
# near-valid
put('verbs_cm', 'hello_in_reject', b'\1' + vhello() + bytes(64))
put('verbs_cm', 'challenge_in_request', b'\0' + vchal())
put('verbs_cm', 'hello_bad_magic', b'\0' + vhello(magic=VERBS_MAGIC ^ 1))
put('verbs_cm', 'hello_bad_version', b'\0' + vhello(version=2))
put('verbs_cm', 'hello_kind5', b'\0' + vhello(kind=5))
put('verbs_cm', 'hello_unterminated', b'\0' + vhello(b'x' * 32))
put('verbs_cm', 'hello_trailing', b'\0' + vhello(b'node\0junk'))
put('verbs_cm', 'hello_dot', b'\0' + vhello(b'.node'))
put('verbs_cm', 'hello_short', b'\0' + vhello()[:55])
put('verbs_cm', 'challenge_rsvd', b'\1' + vchal(rsvd=1))
put('verbs_cm', 'challenge_short', b'\1' + vchal()[:119])
put('verbs_cm', 'challenge_bad_name', b'\1' + vchal(b'node s'))
put('verbs_cm', 'denied_short', b'\1' + denied[:56])
print('corpus written under', os.path.join(here, 'corpus'))
