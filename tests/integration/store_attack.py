#!/usr/bin/env python3
"""A stranger attacking rank 0's TCP store (used by test_store_attacks.sh).

Speaks the store's wire format (collectives/bootstrap/tcp_store_wire.h) by hand: reads the
store's greeting when there is one (dptrain before issue 14 sent none and trusted any hello).

  store_attack.py hello PORT RANK WORLD [MAC_HEX]   fake hello; prints the store's answer
  store_attack.py huge PORT PID                    a frame declaring 1 GiB, up to 600 MB of it;
                                                   prints bytes taken and PID's RSS growth (MB)
  store_attack.py flood PORT N SECONDS             opens N connections and holds them
  store_attack.py jobid TOKEN                      the job id a token shows (12 hex digits)
"""
import hashlib, hmac, os, socket, struct, sys, time


def recv_frame(s, timeout):
    s.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < 4 or len(buf) < 4 + struct.unpack("<I", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
    except (socket.timeout, ConnectionError):
        return None
    n = struct.unpack("<I", buf[:4])[0]
    return buf[4:4 + n]


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def string(b):
    return struct.pack("<I", len(b)) + b


def hello(port, rank, world, mac_hex=""):
    s = connect(port)
    greeting = recv_frame(s, 1.0)
    if greeting is None:  # an old store: no greeting, no token
        body = struct.pack("<Bii", 1, rank, world)
    else:
        body = struct.pack("<Bii", 1, rank, world) + string(os.urandom(16)) + string(bytes.fromhex(mac_hex)) + string(b"")
    s.sendall(struct.pack("<I", len(body)) + body)
    answer = recv_frame(s, 5.0)
    if answer is None:
        print("closed")
    elif answer[0] == 0:
        print("accepted")
        time.sleep(3)  # hold the slot a moment, as a squatter would
    else:
        n = struct.unpack("<I", answer[1:5])[0]
        print("refused: " + answer[5:5 + n].decode())


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1


def huge(port, pid):
    before = rss_mb(pid)
    s = connect(port)
    recv_frame(s, 1.0)
    s.settimeout(10)
    chunk = b"z" * (1 << 20)
    sent = 0
    peak = before
    try:
        s.sendall(struct.pack("<I", 1 << 30))
        while sent < 600 << 20:
            s.sendall(chunk)
            sent += len(chunk)
            if sent % (64 << 20) == 0:
                peak = max(peak, rss_mb(pid))
    except (OSError, socket.timeout):
        pass
    time.sleep(0.5)
    peak = max(peak, rss_mb(pid))
    print(f"taken {sent >> 20} MB grown {peak - before:.0f} MB")


def flood(port, n, seconds):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 200), hard))
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            pass
    print(f"opened {len(socks)}", flush=True)
    time.sleep(seconds)


def main():
    cmd = sys.argv[1]
    if cmd == "hello":
        hello(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
    elif cmd == "huge":
        huge(int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "flood":
        flood(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif cmd == "jobid":
        print(hmac.new(sys.argv[2].encode(), b"dptrain job id", hashlib.sha256).hexdigest()[:12])


if __name__ == "__main__":
    main()
