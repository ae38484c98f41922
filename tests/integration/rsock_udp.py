#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An ordinary UDP echo client and server with nothing of RDMA in them,
for check_rsockets.sh: under rdma-core's librspreload.so their sockets are
datagram rsockets of libroshm-verbs.
  rsock_udp.py server ADDR PORT   echo to each source until "QUIT"
  rsock_udp.py client ADDR PORT   200 datagrams of 32 to 3200 bytes, each
                                  echo checked by its bytes and source
                                  (sent again after 1 s, 5 times at most)
"""
import hashlib
import socket
import sys


def main():
    mode, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if mode == 'server':
        s.bind((ip, port))
        n = 0
        while True:
            b, a = s.recvfrom(65536)
            if b == b'QUIT':
                break
            s.sendto(b, a)
            n += 1
        print('server: echoed', n)
        return 0
    s.settimeout(1.0)
    ok = 0
    for i in range(200):
        data = hashlib.sha256(str(i).encode()).digest() * (1 + i % 100)
        for _ in range(5):
            s.sendto(data, (ip, port))
            try:
                while True:
                    b, a = s.recvfrom(65536)
                    if b == data:
                        break
                break
            except socket.timeout:
                continue
        else:
            print('client: no echo of datagram', i)
            return 1
        if a != (ip, port):
            print('client: echo from', a)
            return 1
        ok += 1
    for _ in range(3):
        s.sendto(b'QUIT', (ip, port))
    print('client: ok', ok)
    return 0


if __name__ == '__main__':
    sys.exit(main())
