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
    'bad_flag': sqe(WRITE, H4K, 0, 0, 8, flags=4), 'opcode_max': sqe(8), 'opcode_255': sqe(255),
    # ROSHM_SQE_F_LBUF (flags bit 1): the local buffer is a region of the
    # client's own (lbuf_handle in the old rsvd1; arena_off its data offset)
    'lbuf_write': sqe(WRITE, H4K, 0, 100, 64, flags=2, r1=h(13, 10)),
    'lbuf_read_whole': sqe(READ, H4K, 0, 0, 4096, flags=2, r1=h(13, 10)),
    'lbuf_past_end': sqe(WRITE, H4K, 0, 4000, 97, flags=2, r1=h(13, 10)),
    'lbuf_opened_only': sqe(READ, H4K, 0, 0, 8, flags=2, r1=H4K),
    'lbuf_dead': sqe(WRITE, H4K, 0, 0, 8, flags=2, r1=h(14, 11)),
    'lbuf_huge_top': sqe(READ, H4K, 0, 2**64 - 24, 16, flags=2, r1=h(15, 12)),
    'lbuf_atomic': sqe(FADD, H4K, 0, 0, 8, flags=2, op1=1, r1=h(13, 10)),
    'lbuf_fence_write': sqe(WRITE, HTXN, 8, 0, 8, flags=3, r1=h(13, 10)),
    'lbuf_remote_own': sqe(WRITE, H4K, 0, 0, 8, flags=2, r1=h(16, 13)),
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
          'epoch': '10101741285430128617', 'mem_id': '77', 'gid': '5a17c0ffee0ddba1', 'data_size': '65536',
          'txn_slots': 0, 'slot_size': 0, 'policy': 'tenant', 'tenants': []}
put('record', 'region_tcp', dump(region))
put('record', 'region_verbs', dump(dict(region, endpoint='verbs:198.18.1.1:7472', rkey=4660,
                                        raddr='140737354129408', txn_slots=16, slot_size=4096)))
put('record', 'region_list_policy', dump(dict(region, policy='list', tenants=['team-a', 'team_b', 'c.d'])))
put('record', 'region_grant_policy', dump(dict(region, policy='grant', grants=['0123456789abcdef', 'ffffffffffffffff'])))
put('record', 'region_grant_part', dump(dict(region, policy='grant', grants=[
    '0123456789abcdef:0000000000000010:0000000000000030:1', '0123456789abcdef'])))
put('record', 'region_grant_part_bad', dump(dict(region, policy='grant', grants=[
    '0123456789abcdef:0000000000000030:0000000000000010:1'])))
verbs_region = dict(region, endpoint='verbs:198.18.1.1:7472', rkey=4660, raddr='140737354129408')
put('record', 'region_grant_rkeys', dump(dict(verbs_region, policy='grant', grants=[
    '0123456789abcdef:0000000000000010:0000000000000030:1', '0123456789abcdef'],
    grant_rkeys=[4294967295, 0])))
put('record', 'region_grant_rkeys_short', dump(dict(verbs_region, policy='grant',
    grants=['0123456789abcdef', 'ffffffffffffffff'], grant_rkeys=[17])))
put('record', 'region_grant_rkeys_tcp', dump(dict(region, policy='grant', grants=['0123456789abcdef'],
    grant_rkeys=[17])))
put('record', 'region_ogid', dump(dict(region, policy='grant', ogid='00000000000000a1', grants=['00000000000000a1'])))
put('record', 'region_ogid_zero', dump(dict(region, ogid='0000000000000000')))
put('record', 'region_grant_empty', dump(dict(region, policy='grant', grants=[])))
put('record', 'region_grant_upper', dump(dict(region, policy='grant', grants=['0123456789ABCDEF'])))
put('record', 'region_grants_on_tenant', dump(dict(region, grants=['0123456789abcdef'])))
put('record', 'region_owner_stale', dump(dict(region, policy='owner', state='stale', endpoint='')))
put('record', 'region_max_values', dump(dict(region, epoch='18446744073709551615', key=4294967295,
                                             data_size='18446744073709551615')))
put('record', 'node', dump({'node': 'node-a', 'endpoint': 'tcp:198.18.0.1:7471', 'pid': 4242}))
put('record', 'node_no_transport', dump({'node': 'n1', 'endpoint': '', 'pid': 1}))
put('record', 'node_host', dump({'node': 'n1', 'endpoint': '', 'pid': 1,
                                 'host': 'd68b1ac8-83f1-4265-8b79-0d6ea71e10ac'}))
put('record', 'node_host_bad', dump({'node': 'n1', 'endpoint': '', 'pid': 1, 'host': 'D6-x'}))
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
put('config', 'idle_yield', 'dataplane: { idle = "adaptive"; idle_spin_us = 5000; idle_yield = true; };\n'
    'transport: { verbs: { enabled = true; retry_count = 6; ack_timeout = 16; }; };\n')
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
TCP_VERSION = 2  # ROSHM_TCP_VERSION


def hello1(node=b'node-r', magic=TCP_MAGIC, version=TCP_VERSION, nonce=bytes(range(32))):
    return struct.pack('<II32s64s', magic, version, nonce, node)


def hello3(magic=TCP_MAGIC, version=TCP_VERSION, mac=b'\0' * 32):
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
put('tcp_handshake', 'bad_version', ctl(1, 0, 64) + hello1(version=1) + hello3())
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

# ---- tcp_dial: control byte, then the responder's hello2 (168) and more ----
def hello2(node=b'node-s', magic=TCP_MAGIC, version=TCP_VERSION, nonce=bytes(range(32, 64)), mac=b'\0' * 32):
    return struct.pack('<II32s64s32s', magic, version, nonce, node, mac)


put('tcp_dial', 'signed_whole', ctl(1, 0, 64) + hello2())
put('tcp_dial', 'signed_then_frame', ctl(1, 0, 64) + hello2() + frame)
put('tcp_dial', 'signed_bytewise_eof', ctl(1, 1, 1) + hello2(b'n' * 63))
put('tcp_dial', 'unsigned_mac', ctl(0, 0, 64) + hello2(mac=b'\x55' * 32))
put('tcp_dial', 'short_eof', ctl(0, 1, 9) + hello2()[:80])
put('tcp_dial', 'bad_magic', ctl(1, 0, 64) + hello2(magic=0))
put('tcp_dial', 'bad_version', ctl(1, 0, 64) + hello2(version=3))
put('tcp_dial', 'node_unterminated', ctl(1, 0, 64) + hello2(b'x' * 64))
put('tcp_dial', 'node_bad', ctl(1, 0, 64) + hello2(b'a b'))

# ---- txn_slot: control byte, data size, slot size, staged slot bytes ----
SEQ = 12345


def slot(segs, payload, seq=SEQ, nseg=None, plen=None, crc=0):
    body = b''.join(struct.pack('<QI4x', o, l) for o, l in segs)
    return struct.pack('<QQIIII', seq, 7, len(segs) if nseg is None else nseg,
                       len(payload) if plen is None else plen, crc, 0) + body + payload


def txs(ctrl, dsize, ssize, data):
    return bytes([ctrl]) + struct.pack('<HH', dsize - 1, ssize - 128) + data


put('txn_slot', 'one_segment', txs(3, 4096, 512, slot([(100, 8)], b'ABCDEFGH')))
put('txn_slot', 'two_segments', txs(3, 1000, 256, slot([(0, 4), (996, 4)], b'abcdwxyz')))
put('txn_slot', 'empty', txs(3, 64, 128, slot([], b'')))
put('txn_slot', 'crc_wrong', txs(1, 4096, 512, slot([(100, 8)], b'ABCDEFGH', crc=1)))
put('txn_slot', 'seq_wrong', txs(2, 4096, 512, slot([(100, 8)], b'ABCDEFGH', seq=1)))
put('txn_slot', 'seg_past_end', txs(3, 100, 256, slot([(96, 8)], b'ABCDEFGH')))
put('txn_slot', 'seg_wraps', txs(3, 100, 256, slot([(2**64 - 4, 8)], b'ABCDEFGH')))
put('txn_slot', 'sum_short', txs(3, 4096, 512, slot([(0, 8)], b'ABCD', plen=4)))
put('txn_slot', 'nseg_17', txs(3, 4096, 2048, slot([(0, 1)] * 17, b'x' * 17)))
put('txn_slot', 'too_big_for_slot', txs(3, 4096, 128, slot([(0, 100)], b'y' * 100)))

# ---- tcp_frames: control byte, then the peer's frames (an exported region
# id 1 of 64 KiB with a 2-slot, 1 KiB log; bit 0 fixes id, key, epoch) ----
F_RAW = 1


def req(op, off, ln, op1=0, op2=0, flags=0, tag=1, rid=1, key=0, epoch=0):
    return struct.pack('<BBHIIIQQQQQ', op, flags, 0, ln, rid, key, epoch, off, op1, op2, tag)


def fctl(fix, eof, chunk16):
    return bytes([(1 if fix else 0) | (2 if eof else 0) | ((chunk16 - 1) << 2)])


put('tcp_frames', 'write_read', fctl(1, 0, 64) + req(WRITE, 0, 16) + b'0123456789abcdef' +
    req(READ, 0, 16, tag=2))
put('tcp_frames', 'atomics', fctl(1, 0, 64) + req(FADD, 8, 8, op1=5) + req(CAS, 8, 8, op1=5, op2=9, tag=2))
put('tcp_frames', 'write_last_bytes', fctl(1, 1, 1) + req(WRITE, 65536 - 4, 4) + b'tail')
put('tcp_frames', 'write_past_end', fctl(1, 0, 64) + req(WRITE, 65536 - 4, 8) + b'overflow')
put('tcp_frames', 'read_past_end', fctl(1, 0, 64) + req(READ, 2**63, 8))
put('tcp_frames', 'raw_txn_tail', fctl(1, 0, 64) + req(FADD, 48, 8, op1=1, flags=F_RAW))
# reservations in a row (one open per node on a grant region, the log's
# window) and an addend other than 1 (refused on every region)
put('tcp_frames', 'raw_txn_tail_flood', fctl(1, 0, 64) +
    b''.join(req(FADD, 48, 8, op1=1, flags=F_RAW, tag=t) for t in range(1, 9)) +
    req(FADD, 48, 8, op1=5, flags=F_RAW, tag=9))
F_SEQ = 4
put('tcp_frames', 'raw_stage_write', fctl(1, 0, 64) + req(WRITE, 4096 + 32, 32, flags=F_RAW | F_SEQ) + b'S' * 32)
put('tcp_frames', 'raw_stage_write_noseq', fctl(1, 0, 64) + req(WRITE, 4096 + 32, 32, flags=F_RAW) + b'S' * 32)
put('tcp_frames', 'raw_stage_write_late', fctl(1, 0, 64) + req(FADD, 48, 8, op1=1, flags=F_RAW) +
    req(WRITE, 4096 + 1024 + 32, 32, op1=3, flags=F_RAW | F_SEQ, tag=2) + b'L' * 32)
put('tcp_frames', 'raw_header_write', fctl(1, 0, 64) + req(WRITE, 0, 16, flags=F_RAW) + b'H' * 16)
put('tcp_frames', 'raw_state_cas', fctl(1, 0, 64) + req(CAS, 4096, 8, op1=0, op2=1, flags=F_RAW))
put('tcp_frames', 'bad_opcode', fctl(1, 0, 64) + req(99, 0, 8))
# longer than max_msg (32 KiB in the target): -EMSGSIZE alone, a payload
# dropped, the frames behind go on
put('tcp_frames', 'over_max_msg', fctl(1, 0, 64) + req(READ, 0, 1 << 20) +
    req(WRITE, 0, (32 << 10) + 1, tag=2) + b'O' * ((32 << 10) + 1) +
    req(TXC, 0, (32 << 10) + 8, op1=7, tag=3) + b'T' * ((32 << 10) + 8) + req(READ, 0, 64, tag=4))
put('tcp_frames', 'unfixed_key', fctl(0, 0, 64) + req(WRITE, 0, 8, key=1) + b'12345678')
put('tcp_frames', 'many_reads', fctl(1, 0, 8) + b''.join(req(READ, 0, 4096, tag=i) for i in range(64)))
put('tcp_frames', 'misaligned_atomic', fctl(1, 0, 64) + req(FADD, 3, 8, op1=1))
# TXN_COMMIT: the staged record (seq and crc the owner's), its outcome looked up when sent again
F_AGAIN = 2
TXN = TXC


def staged(nseg=1, plen=8, txn_id=7):
    segs = b''.join(struct.pack('<QII', 64 * i, plen, 0) for i in range(nseg))
    return struct.pack('<QQIIII', 2**64 - 1, txn_id, nseg, nseg * plen, 0, 0) + segs + b'P' * (nseg * plen)


rec1 = staged()
put('tcp_frames', 'txn_commit', fctl(1, 0, 64) + req(TXN, 0, len(rec1), op1=7) + rec1 +
    req(TXN, 0, len(rec1), op1=8, tag=2) + staged(txn_id=8))
put('tcp_frames', 'txn_again', fctl(1, 0, 16) + req(TXN, 0, len(rec1), op1=7) + rec1 +
    req(TXN, 0, len(rec1), op1=7, op2=0, flags=F_AGAIN, tag=2) + rec1 +
    req(TXN, 0, len(rec1), op1=9, op2=1, flags=F_AGAIN, tag=3) + staged(txn_id=9))
put('tcp_frames', 'txn_log_full', fctl(1, 0, 64) + b''.join(
    req(TXN, 0, len(rec1), op1=20 + i, tag=i) + staged(txn_id=20 + i) for i in range(4)))
put('tcp_frames', 'txn_short', fctl(1, 1, 1) + req(TXN, 0, 8, op1=1) + b'12345678' +
    req(TXN, 0, 2000, op1=2, tag=2) + b'L' * 2000)
# payloads of 16 KiB and more are read straight into the region, the next header behind them
put('tcp_frames', 'write_direct', fctl(1, 0, 64) + req(WRITE, 0, 20000) + b'D' * 20000 +
    req(WRITE, 20000, 32768, tag=2) + b'E' * 32768 + req(READ, 0, 20000, tag=3) +
    req(WRITE, 65536 - 16, 16, tag=4) + b'F' * 16)
# region 2 (an even id) is of policy grant: the peer's node holds data [4096, 8192) only
GR = 2


def staged_at(offs, plen=8, txn_id=7, seq=2**64 - 1):
    segs = b''.join(struct.pack('<QII', o, plen, 0) for o in offs)
    return struct.pack('<QQIIII', seq, txn_id, len(offs), len(offs) * plen, 0, 0) + segs + b'G' * (len(offs) * plen)


put('tcp_frames', 'grant_ops', fctl(1, 0, 64) + req(WRITE, 4096, 8, rid=GR) + b'in-part' + b'!' +
    req(WRITE, 0, 8, rid=GR, tag=2) + b'outside!' + req(WRITE, 8188, 8, rid=GR, tag=3) + b'acrossit' +
    req(READ, 8184, 8, rid=GR, tag=4) + req(READ, 8192, 8, rid=GR, tag=5) +
    req(FADD, 4096, 8, op1=1, rid=GR, tag=6) + req(CAS, 64, 8, op1=0, op2=1, rid=GR, tag=7))
g_in, g_out = staged_at([4096, 4160]), staged_at([4096, 0], txn_id=8)
put('tcp_frames', 'grant_txn_commit', fctl(1, 0, 64) + req(TXN, 0, len(g_in), op1=7, rid=GR) + g_in +
    req(TXN, 0, len(g_out), op1=8, rid=GR, tag=2) + g_out)
# the raw way: reserve (one at a time), stage, commit on the state word; then a sequence not reserved
g_raw = staged_at([0], txn_id=9, seq=0)
put('tcp_frames', 'grant_raw_txn', fctl(1, 0, 64) + req(FADD, 48, 8, op1=1, flags=F_RAW, rid=GR) +
    req(WRITE, 4096 + 32, len(g_raw), op1=0, flags=F_RAW | F_SEQ, rid=GR, tag=2) + g_raw +
    req(FADD, 4096, 8, op1=1, flags=F_RAW, rid=GR, tag=3) +
    req(CAS, 4096, 8, op1=0, op2=2, flags=F_RAW, rid=GR, tag=4) +
    req(FADD, 48, 8, op1=2, flags=F_RAW, rid=GR, tag=5) +
    req(WRITE, 4096 + 1024 + 32, 32, op1=1, flags=F_RAW | F_SEQ, rid=GR, tag=6) + b'N' * 32 +
    req(CAS, 4096 + 1024, 8, op1=4, op2=6, flags=F_RAW, rid=GR, tag=7) +
    req(READ, 4096 + 32, 64, flags=F_RAW, rid=GR, tag=8) + req(READ, 4096, 32, flags=F_RAW, rid=GR, tag=9))

# ---- control: records [kind][len lo][len hi][message] ----
CTL_MAGIC, ABI = 0x4c54434f, 2
T_HELLO, T_CREATE, T_OPEN, T_CLOSE, T_ADMIN, T_REATTACH, T_CHANNEL, T_GRANT = 1, 2, 3, 4, 5, 6, 7, 8


def chdr(t, ln):
    return struct.pack('<IHHIi', CTL_MAGIC, t, ABI, ln, 0)


def rec(kind, msg):
    return bytes([kind]) + struct.pack('<H', len(msg)) + msg


def hello_msg(tenant_sel=1, sq=0, cq=0, arena=0, key=0):
    body = bytes([tenant_sel, 0]) + bytes(64 - 2) + bytes(128) + bytes(64) + struct.pack('<IIQQ', sq, cq, arena, key)
    return chdr(T_HELLO, 16 + len(body))[:16] + body


def channel_msg(size=0):
    return chdr(T_CHANNEL, 24) + struct.pack('<Q', size)


def create_msg(name=b'r1', size=4096, policy=0, tenants=(), slots=0, slot_size=0, t=T_CREATE):
    tn = b''.join(struct.pack('64s', x) for x in tenants) + bytes(64 * (8 - len(tenants)))
    body = struct.pack('64sQII', name, size, policy, len(tenants)) + tn + struct.pack('<II', slots, slot_size)
    body += struct.pack('<QQQII', 0, 0, 0, 0, 0)  # va_base, win_off, win_len, access, rsvd
    return chdr(t, 16 + len(body)) + body


def open_msg(name=b'default/r1', off=0, ln=0, access=0):
    return chdr(T_OPEN, 16 + 128 + 24) + struct.pack('<128sQQII', name, off, ln, access, 0)


def close_msg(handle):
    return chdr(T_CLOSE, 24) + struct.pack('<II', handle, 0)


def grant_msg(handle, peer, op=1, name=b'', gid=0, off=0, ln=0, access=0):
    # handle, peer, op, access, gid, name, win_off, win_len
    return chdr(T_GRANT, 16 + 104) + struct.pack('<IIIIQ64sQQ', handle, peer, op, access, gid, name, off, ln)


def admin_msg(cmd=b'status', tenant=b'', token=b'', admin=b''):
    body = struct.pack('256s64s128s128s', cmd, tenant, token, admin)
    return chdr(T_ADMIN, 16 + len(body)) + body


HELLO_OK = 0x40
FD_RIGHT, FD_SMALL, FD_PIPE, FIX = 1, 2, 3, 4
attach = rec(HELLO_OK, hello_msg(1)) + rec(FD_RIGHT | FIX, channel_msg())
put('control', 'attach', attach)
put('control', 'attach_create_open_close', attach + rec(FD_RIGHT | FIX, create_msg()) +
    rec(FIX, open_msg(b'a/r1')) + rec(FIX, close_msg(1 | 1 << 16)))
put('control', 'attach_create_txn', attach + rec(FD_RIGHT | FIX, create_msg(b'tx', 8192, slots=4, slot_size=256)))
put('control', 'attach_create_policy', attach + rec(FD_RIGHT | FIX, create_msg(b'p', 4096, 2, (b'b', b'default'))))
put('control', 'attach_reattach', attach + rec(FD_RIGHT | FIX, create_msg(b'ra', 4096, t=T_REATTACH)))
put('control', 'attach_grant', attach + rec(FD_RIGHT | FIX, create_msg(b'g', 4096, 3)) +
    rec(FD_RIGHT | FIX, create_msg(b'r', 4096)) + rec(FIX, open_msg(b'a/r')) +
    rec(FIX, grant_msg(1 | 1 << 16, 3 | 1 << 16)) + rec(FIX, open_msg(b'a/g')) +
    rec(FIX, grant_msg(1 | 1 << 16, 3 | 1 << 16, 2)) + rec(FIX, grant_msg(2 | 1 << 16, 1 | 1 << 16, 7)) +
    rec(FIX, close_msg(3 | 1 << 16)) + rec(FIX, grant_msg(1 | 1 << 16, 3 | 1 << 16)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'r')) + rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'none')) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 4, b'r')) + rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'../x')))
put('control', 'attach_grant_part', attach + rec(FD_RIGHT | FIX, create_msg(b'g', 8192, 3)) +
    rec(FD_RIGHT | FIX, create_msg(b'r', 4096)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'r', off=100, ln=50, access=1)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'r', off=0, ln=4096, access=5)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'r', off=8000, ln=500, access=1)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 3, b'r', off=(1 << 64) - 8, ln=64, access=1)) +
    rec(FIX, open_msg(b'a/g', 100, 50, 1)) + rec(FIX, open_msg(b'a/g', 100, 51, 1)) +
    rec(FIX, open_msg(b'a/g', (1 << 64) - 1, 2, 0)) + rec(FIX, open_msg(b'a/g', 8, 0, 9)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 2, b'', gid=5, off=100, ln=50, access=1)))
# grants to a client (op 5), a HELLO that asks for a key
put('control', 'attach_grant_owner', rec(HELLO_OK, hello_msg(1, key=0x5eed)) + rec(FD_RIGHT | FIX, channel_msg()) +
    rec(FD_RIGHT | FIX, create_msg(b'g', 8192, 3)) + rec(FD_RIGHT | FIX, create_msg(b'r', 4096)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 5, b'r')) + rec(FIX, grant_msg(1 | 1 << 16, 0, 5, b'r', off=0, ln=4096, access=1)) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 5, b'none')) + rec(FIX, grant_msg(1 | 1 << 16, 0, 5, b'')) +
    rec(FIX, grant_msg(1 | 1 << 16, 0, 6, b'r')) + rec(FIX, open_msg(b'a/g')) +
    rec(FIX, close_msg(2 | 1 << 16)) + rec(FIX, grant_msg(1 | 1 << 16, 0, 5, b'r')))
put('control', 'attach_create_pipe', attach + rec(FD_PIPE | FIX, create_msg()))
put('control', 'attach_create_small', attach + rec(FD_SMALL | FIX, create_msg()))
put('control', 'attach_open_missing', attach + rec(FIX, open_msg(b'b/none')))
put('control', 'attach_twice', attach + rec(HELLO_OK, hello_msg(2)))
put('control', 'channel_before_hello', rec(FD_RIGHT | FIX, channel_msg()))
put('control', 'create_before_attach', rec(FD_RIGHT | FIX, create_msg()))
put('control', 'admin_status', rec(FIX, admin_msg()))
put('control', 'admin_tenant', rec(FIX, admin_msg(b'regions', b'a', b'fuzz-token-of-tenant-a')))
put('control', 'admin_regions_prefix', rec(FIX, admin_msg(b'regions ibv-mc-', b'a', b'fuzz-token-of-tenant-a')))
put('control', 'admin_regions_prefix_admin', rec(0x80 | FIX, admin_msg(b'regions r', b'b')))
put('control', 'admin_drain', rec(FIX, admin_msg(b'drain --tenant a', b'a', b'fuzz-token-of-tenant-a')))
put('control', 'admin_uid1000', rec(0x80 | FIX, admin_msg(b'clients')))
put('control', 'hello_bad_token', rec(FIX, hello_msg(1)))
put('control', 'garbage', rec(0, b'abc'))
put('control', 'unknown_type', rec(FIX | (0 << 3), chdr(99, 16)))
# ---- etcd_watch: the gateway's watch stream (fuzz_etcd_watch.c) ----
def kv(key, val, rev, delete=False, created=False):
    import base64
    ev = {'kv': {'key': base64.b64encode(key.encode()).decode(), 'create_revision': '1',
                 'mod_revision': str(rev), 'version': '1',
                 'value': base64.b64encode(val.encode()).decode()}}
    if delete:
        ev['type'] = 'DELETE'
    res = {'header': {'revision': str(rev)}, 'events': [ev]}
    if created:
        res['created'] = True
    return json.dumps({'result': res}) + '\n'


def wev(op, ksel, rev, val):
    val = val.encode()
    return bytes([op, ksel, rev]) + struct.pack('<H', len(val)) + val


wregion = dict(region, tenant='a', name='r1')
wnode = {'node': 'n1', 'endpoint': 'tcp:198.18.0.1:7471', 'pid': 7}
put('etcd_watch', 'raw_put_unsigned', b'\x00\x3f' + kv('roshm/regions/a/r1', dump(wregion), 5, created=True).encode())
put('etcd_watch', 'raw_split', b'\x00\x02' + (kv('roshm/nodes/n1', dump(wnode), 3) +
                                             kv('roshm/nodes/n1', '', 4, delete=True)).encode())
put('etcd_watch', 'raw_canceled', b'\x00\x10' + json.dumps({'result': {'canceled': True, 'compact_revision': '9',
                                                                       'cancel_reason': 'compacted'}}).encode() + b'\n')
put('etcd_watch', 'raw_error', b'\x00\x10{"error":{"grpc_code":16,"message":"invalid auth token"}}\n')
put('etcd_watch', 'raw_not_json', b'\x00\x05{"result":\n')
put('etcd_watch', 'signed_region_put_delete', b'\x01' + wev(2 | 4 | 8, 0, 5, dump(wregion)) +
    wev(1, 0, 6, '') + wev(2 | 4 | 32, 0, 7, dump(wregion)))
put('etcd_watch', 'signed_node_stale_rev', b'\x01' + wev(2 | 4, 1, 9, dump(wnode)) +
    wev(2 | 4, 1, 8, dump(dict(wnode, pid=8))))
put('etcd_watch', 'filed_under_another_name', b'\x01' + wev(2, 0, 3, dump(dict(wregion, name='r2'))))
put('etcd_watch', 'bad_then_good', b'\x01' + wev(0, 0, 3, dump(wregion)) + wev(2 | 4, 0, 4, dump(wregion)))
put('etcd_watch', 'other_keys', b'\x01' + b''.join(wev(2, k, 10 + k, dump(wregion)) for k in range(8)))
# ---- addr: a flags byte (1 port, 2 numeric, 4 passive), then the string ----
for i, (fl, txt) in enumerate([(3, 'tcp'), (3, '198.18.0.1:7471'), (3, '[fd00:198:18::1]:7471'),
                               (1, 'localhost:9472'), (7, '[::]:9472'), (0, 'fd00:198:18::2'),
                               (0, '[fd00:198:18::2]'), (3, '[::ffff:198.18.0.1]:1'),
                               (3, '[fe80::1%lo]:7471'), (3, '[::1:7471'), (3, '[::1]:0'),
                               (3, '[::1]:65536'), (3, 'fd00::1:7471'), (0, '198.18.0.1:80')]):
    put('addr', 'a%02d' % i, bytes([fl]) + txt.encode())
# ---- rdmacm_wire: the CM frames of libroshm-verbs' librdmacm, as a stream ----
CM_MAGIC, REQ, REP, REJ, RTU, DREQ, SIDR_REQ, SIDR_REP = 0x52434d31, 1, 2, 3, 4, 5, 6, 7


def cmhdr(typ, plen, magic=CM_MAGIC, version=1):
    return struct.pack('>IBBH', magic, version, typ, plen)


def cmconn(typ, pd=b'', qpn=0x123456, psn=0xabcdef, mtu=5, qp_type=2, retry=7, srq=0, zero=0, pd_len=None):
    body = struct.pack('>II16sHBBBBBBBBBB', qpn, psn, bytes(range(16)), 0x1234, mtu, 16, 16, 0, retry, 7, srq,
                       qp_type, len(pd) if pd_len is None else pd_len, zero) + pd
    return cmhdr(typ, len(body)) + body


def cmrej(reason=28, pd=b'', pd_len=None):
    body = struct.pack('>IB3x', reason, len(pd) if pd_len is None else pd_len) + pd
    return cmhdr(REJ, len(body)) + body


put('rdmacm_wire', 'req', cmconn(REQ, b'hello'))
put('rdmacm_wire', 'req_pd56', cmconn(REQ, bytes(range(56))))
put('rdmacm_wire', 'rep_pd196', cmconn(REP, bytes(196)))
put('rdmacm_wire', 'rej', cmrej(28, b'no thanks'))
put('rdmacm_wire', 'rej_pd148', cmrej(8, bytes(148)))
put('rdmacm_wire', 'active_stream', cmconn(REP) + cmhdr(DREQ, 0))
put('rdmacm_wire', 'passive_stream', cmconn(REQ, b'x') + cmhdr(RTU, 0) + cmhdr(DREQ, 0))
# near-valid
put('rdmacm_wire', 'req_pd57', cmconn(REQ, bytes(57)))
put('rdmacm_wire', 'rep_pd197', cmconn(REP, bytes(197)))
put('rdmacm_wire', 'rej_pd149', cmrej(28, bytes(149)))
put('rdmacm_wire', 'req_pd_len_lies', cmconn(REQ, bytes(10), pd_len=20))
put('rdmacm_wire', 'rej_pd_len_lies', cmrej(28, bytes(10), pd_len=9))
put('rdmacm_wire', 'req_qpn25', cmconn(REQ, qpn=0x1000000))
put('rdmacm_wire', 'req_mtu6', cmconn(REQ, mtu=6))
# SIDR (RDMA_PS_UDP): qp_type 4, the Q_Key where the PSN is (REP only)
put('rdmacm_wire', 'sidr_req_pd180', cmconn(SIDR_REQ, bytes(180), psn=0, qp_type=4))
put('rdmacm_wire', 'sidr_rep', cmconn(SIDR_REP, b'ok', psn=0x01234567, qp_type=4))
put('rdmacm_wire', 'sidr_req_pd181', cmconn(SIDR_REQ, bytes(181), psn=0, qp_type=4))
put('rdmacm_wire', 'sidr_rep_pd137', cmconn(SIDR_REP, bytes(137), psn=1, qp_type=4))
put('rdmacm_wire', 'sidr_req_qkey', cmconn(SIDR_REQ, psn=5, qp_type=4))
put('rdmacm_wire', 'sidr_rep_rc', cmconn(SIDR_REP, psn=5, qp_type=2))
put('rdmacm_wire', 'req_ud', cmconn(REQ, qp_type=4))
# XRC: a REQ names XRC_SEND (9), a REP XRC_RECV (10); not the other way round
put('rdmacm_wire', 'xrc_stream', cmconn(REQ, b'x', qp_type=9) + cmconn(REP, b'srqn', qp_type=10))
put('rdmacm_wire', 'req_xrc_recv', cmconn(REQ, qp_type=10))
put('rdmacm_wire', 'rep_xrc_send', cmconn(REP, qp_type=9))
put('rdmacm_wire', 'req_retry8', cmconn(REQ, retry=8))
put('rdmacm_wire', 'req_srq2', cmconn(REQ, srq=2))
put('rdmacm_wire', 'req_zero_byte', cmconn(REQ, zero=1))
put('rdmacm_wire', 'bad_magic', cmhdr(RTU, 0, magic=CM_MAGIC ^ 1))
put('rdmacm_wire', 'version2', cmhdr(RTU, 0, version=2))
put('rdmacm_wire', 'type0', cmhdr(0, 0))
put('rdmacm_wire', 'type6', cmhdr(6, 0))
put('rdmacm_wire', 'rtu_with_payload', cmhdr(RTU, 1) + b'\0')
put('rdmacm_wire', 'req_huge_len', cmhdr(REQ, 0xffff))
put('rdmacm_wire', 'req_truncated', cmconn(REQ, b'abc')[:30])
put('rdmacm_wire', 'good_then_garbage', cmhdr(RTU, 0) + b'GET / HTTP/1.0\r\n\r\n')
# ---- rsocket_wire: our slots, slot size, the hello, then steps (action, immediate, length) ----
RS_MAGIC, RS_DATA, RS_CREDIT, RS_FIN = 0x52535231, 0, 1, 2


def rshello(slots=16, seg=16384, magic=RS_MAGIC):
    return struct.pack('>III', magic, slots, seg)


def rsrun(hello, steps, nrx=14, seg=255):
    return bytes([nrx, seg, len(hello)]) + hello + b''.join(
        struct.pack('>BIH', a, imm, ln) for a, imm, ln in steps)


def rsimm(t, c=0, n=0):
    return t << 28 | c << 24 | n


stream = [(0, rsimm(RS_DATA), 512), (3, 0, 0), (1, 0, 0), (0, rsimm(RS_CREDIT, 1, 1), 0),
          (0, rsimm(RS_DATA, 0, 0), 0), (2, 0, 0), (0, rsimm(RS_FIN, 1, 0), 0)]
put('rsocket_wire', 'stream', rsrun(rshello(), stream))
put('rsocket_wire', 'hello_padded', rsrun(rshello() + bytes(44), stream[:3]))
put('rsocket_wire', 'two_slots', rsrun(rshello(2, 64), [(1, 0, 0), (1, 0, 0), (0, rsimm(RS_DATA, 0, 2), 0)]))
put('rsocket_wire', 'full', rsrun(rshello(), [(0, rsimm(RS_DATA), 32)] * 17, nrx=14))
# near-valid
put('rsocket_wire', 'hello_short', rsrun(rshello()[:11], []))
put('rsocket_wire', 'hello_magic', rsrun(rshello(magic=RS_MAGIC ^ 1), []))
put('rsocket_wire', 'hello_one_slot', rsrun(rshello(1), []))
put('rsocket_wire', 'hello_1025_slots', rsrun(rshello(1025), []))
put('rsocket_wire', 'hello_seg63', rsrun(rshello(seg=63), []))
put('rsocket_wire', 'hello_seg_1m1', rsrun(rshello(seg=(1 << 20) + 1), []))
put('rsocket_wire', 'credit_too_many', rsrun(rshello(), [(1, 0, 0), (0, rsimm(RS_CREDIT, 0, 2), 0)]))
put('rsocket_wire', 'ctrl_too_many', rsrun(rshello(), [(2, 0, 0), (0, rsimm(RS_DATA, 2, 0), 0)]))
put('rsocket_wire', 'reserved_bit', rsrun(rshello(), [(0, rsimm(RS_DATA) | 1 << 16, 0)]))
put('rsocket_wire', 'type3', rsrun(rshello(), [(0, rsimm(3), 0)]))
put('rsocket_wire', 'fin_with_bytes', rsrun(rshello(), [(0, rsimm(RS_FIN), 32)]))
put('rsocket_wire', 'longer_than_slot', rsrun(rshello(), [(0, rsimm(RS_DATA), 513)], seg=0))
put('rsocket_wire', 'ctrl_flood', rsrun(rshello(), [(0, rsimm(RS_CREDIT), 0)] * 5))


def rsiomap(off, addr, ln, rkey=1):
    return bytes([4]) + struct.pack('>QQII', off, addr, ln, rkey)


put('rsocket_wire', 'after_fin', rsrun(rshello(), [(0, rsimm(RS_FIN), 0), (0, rsimm(RS_CREDIT), 0),
                                                (0, rsimm(RS_DATA), 32)]))
put('rsocket_wire', 'iomaps', rsrun(rshello(), []) + rsiomap(0, 4096, 100) + rsiomap(100, 8192, 50) +
    rsiomap(0, 0, 0) + rsiomap(0, 4096, 100))
put('rsocket_wire', 'iomap_overlap', rsrun(rshello(), []) + rsiomap(0, 4096, 100) + rsiomap(99, 0, 1))
put('rsocket_wire', 'iomap_nine', rsrun(rshello(), []) + b''.join(rsiomap(i * 10, 4096, 10) for i in range(9)))
put('rsocket_wire', 'iomap_wrap', rsrun(rshello(), []) + rsiomap((1 << 63) - 10, 0, 100) +
    rsiomap(0, (1 << 64) - 10, 100) + rsiomap(5, 0, 0))


def rsdg(op, qpn, payload=b'', magic=0x52534431, ln=None):
    m = struct.pack('>IB3sI16s', magic, op, bytes(3), qpn, bytes(range(16))) + payload
    return bytes([5, len(m) if ln is None else ln]) + m.ljust(64, b'\0')[:64]


def rsud(kind, token, payload=b'', fam=2, addr=bytes([198, 18, 0, 2]) + bytes(12)):
    m = struct.pack('>QIHH16s', token, kind, fam, 7970, addr) + payload
    return bytes([5, len(m)]) + m.ljust(64, b'\0')[:64]


q = lambda v: struct.pack('>Q', v)
dg_ok = (rsdg(1, 0x12, b'hello') + rsdg(2, 0x34, q(77)) + rsdg(4, 0x34, q(5)) + rsdg(3, 0x34, q(5) + q(6)) +
         rsud(0, 77, b'datagram') + rsud(1, 77, q(5)) + rsud(0, 78, b'v6', fam=10, addr=bytes(range(16))))
put('rsocket_wire', 'dgram', rsrun(rshello(), [(0, rsimm(RS_DATA), 32)]) + dg_ok)
put('rsocket_wire', 'dgram_bad', rsrun(rshello(), []) + rsdg(2, 0x34) + rsdg(1, 0) +
    rsdg(1, 1 << 24) + rsdg(5, 5, q(1)) + rsdg(1, 5, bytes(17)) + rsdg(1, 5, magic=0x52534432) +
    rsdg(3, 5, q(1)) + rsdg(1, 5, b'abc', ln=200) + rsud(2, 1) + rsud(1, 1, bytes(7)) +
    rsud(0, 1, bytes(17)) + rsud(0, 1, fam=3) + rsud(0, 1, addr=bytes(15) + b'\1'))
# ---- verbs_frag: ring size exponent, connected QPN, then 32-byte fragment headers ----
def vfrag(ln, nslots, total, op=1, flags=3, src=0x123456, imm=0, tag=0):
    return struct.pack('<QIIIIIBBH', tag, ln, nslots, total, imm, src, op, flags, 0)


def vfrags(frags, exp=10, qpn=0x123456):
    return bytes([exp]) + struct.pack('<I', qpn) + b''.join(frags)


put('verbs_frag', 'send_one', vfrags([vfrag(100, 3, 100)]))
put('verbs_frag', 'send_three', vfrags([vfrag(1984, 32, 3000, flags=1), vfrag(960, 16, 0, flags=0),
                                        vfrag(56, 2, 0, flags=2), vfrag(0, 1, 0)]))
put('verbs_frag', 'kinds', vfrags([vfrag(8, 2, 8, op=2, imm=7), vfrag(0, 1, 4096, op=3, imm=9),
                                   vfrag(0, 1, 0, op=4, imm=0x1234), vfrag(64, 2, 64, op=1)]))
put('verbs_frag', 'wrap', vfrags([vfrag(896, 15, 896), vfrag(0, 1, 0), vfrag(64, 2, 64)], exp=4))
put('verbs_frag', 'past_ring', vfrags([vfrag(960, 16, 960), vfrag(64, 17, 64)], exp=4))
put('verbs_frag', 'bad', vfrags([vfrag(65, 2, 65)]) + vfrag(0, 1, 0, src=1) + vfrag(0, 0, 0) +
    vfrag(10, 2, 20, flags=2))
put('verbs_frag', 'mid_first', vfrags([vfrag(64, 2, 128, flags=0)]))
put('verbs_frag', 'first_twice', vfrags([vfrag(64, 2, 128, flags=1), vfrag(64, 2, 128, flags=1)]))
put('verbs_frag', 'short_last', vfrags([vfrag(64, 2, 128, flags=1), vfrag(32, 2, 128, flags=2)]))
put('verbs_frag', 'op_change', vfrags([vfrag(64, 2, 128, flags=1), vfrag(64, 2, 128, op=2, flags=2)]))
put('verbs_frag', 'too_big', vfrags([vfrag(64, 2, (1 << 30) + 1, flags=1)]))
put('verbs_frag', 'imm_payload', vfrags([vfrag(8, 2, 8, op=3)]))
put('verbs_frag', 'op5', vfrags([vfrag(8, 2, 8, op=5)]))
put('verbs_frag', 'flags4', vfrags([vfrag(8, 2, 8, flags=7)]))
put('verbs_frag', 'nslots_huge', vfrags([vfrag(0, 0xffffffff, 0)]))

# ---- tcp_dma: byte 0, then 6-byte frame records (length selector, gap lo,
# gap hi, cut bits, payload seed, kind); selectors index fuzz_tcp_dma.c's
# table: 0 0, 1 1, 4 64, 5 65, 10 1000, 13 16383, 14 16384, 17 16448,
# 18 16449, 24 32768, 28 262144, 31 262209, 35 max_msg ----
def dma(lsel, gap=0, cuts=0, seed=1, kind=0):
    return bytes([lsel, gap & 255, gap >> 8, cuts, seed, kind])


END_1, END_64, END_63, END_65, NEXT_HDR, AFTER_HDR, END_P1, MID = 16, 2, 4, 8, 64, 1, 32, 128
put('tcp_dma', 'small', b'\0' + dma(4, cuts=END_1) + dma(5, 3, END_64 | END_63, 2) + dma(0, 1) +
    dma(1, 5, AFTER_HDR, 3) + dma(4, 7, NEXT_HDR, 4))
put('tcp_dma', 'direct_tail', b'\0' + dma(17, 0, END_64 | END_63 | END_65, 5) + dma(18, 1, END_1 | END_P1, 6) +
    dma(14, 2, AFTER_HDR | NEXT_HDR, 7) + dma(13, 3, MID, 8))
put('tcp_dma', 'big', b'\0' + dma(28, 0, END_64, 9) + dma(35, 9, END_1 | NEXT_HDR, 10) + dma(31, 1, END_65, 11))
put('tcp_dma', 'refused', b'\0' + dma(4, 0, 0, 1, 1) + dma(17, 2, END_64, 2, 2) + dma(10, 0, END_1, 3, 3) +
    dma(4, 0, END_1, 4, 0))
put('tcp_dma', 'hole', b'\0' + dma(24, 0, 0, 12, 4) + dma(28, 5, 0, 13, 4) + dma(4, 0, END_1, 14, 0))
put('tcp_dma', 'mixed', b'\0' + b''.join(dma(s, i * 37, (i * 73) & 255, i, i % 5)
                                         for i, s in enumerate([4, 17, 5, 18, 24, 0, 13, 35, 1, 28, 14, 10])))
print('corpus written under', os.path.join(here, 'corpus'))
