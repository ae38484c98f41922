#!/usr/bin/env python3
# An ordinary socket client for check_rsockets.sh: run under rdma-core's
# librspreload.so, its TCP socket becomes an rsocket of libroshm-verbs.
#   rsock_check.py client ADDR PORT BYTES   (the server: rsock_server.c)
# The client sends BYTES random bytes, shuts its side down (FIN) and reads
# the server's answer to EOF: the count and SHA-256 of what the server read,
# which must be its own. Exit 0 only when they match.
import hashlib
import os
import socket
import sys

mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ':' in addr else socket.AF_INET
if mode != 'client':
    sys.exit(2)
size = int(sys.argv[4])
data = os.urandom(size)
s = socket.socket(fam, socket.SOCK_STREAM)
s.connect((addr, port))
s.sendall(data)
s.shutdown(socket.SHUT_WR)
ans = b''
while True:
    b = s.recv(4096)
    if not b:
        break
    ans += b
s.close()
want = f'{size} {hashlib.sha256(data).hexdigest()}'
if ans.decode() != want:
    print(f'client: server read {ans.decode()!r}, sent {want!r}')
    sys.exit(1)
print(f'client: ok: {size} bytes, server agrees on the SHA-256')
