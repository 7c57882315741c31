"""python -m mpnic serve --iface IF --ip A.B.C.D [--mac MAC] [--listen HOST:PORT]
[--timers FILE] [--timer KEY=VALUE]"""
import argparse
import fcntl
import os
import random
import signal
import select
import socket
import struct
import sys
import threading
import time

from . import timers
from .device import Device
from .agent import Agent, serve

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def iface_mac(name):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    info = fcntl.ioctl(s.fileno(), 0x8927, struct.pack("256s", name.encode()[:15]))
    return info[18:24]


def dataplane(dev: Device, iface, stop):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.setblocking(False)
    if dev.mac != iface_mac(iface):
        # PACKET_ADD_MEMBERSHIP promiscuous
        ifindex = socket.if_nametoindex(iface)
        mreq = struct.pack("IHH8s", ifindex, 1, 0, b"")
        s.setsockopt(263, 1, mreq)
    import os
    rp, wp = os.pipe()
    os.set_blocking(rp, False)
    os.set_blocking(wp, False)

    def wake():
        try:
            os.write(wp, b"x")
        except BlockingIOError:
            pass
    dev.wake = wake

    def drain():
        # called with dev.lock held (agent thread): process frames already
        # received so that memory/CQ reads see every packet on the wire before them
        now = time.monotonic_ns()
        for _ in range(1024):
            try:
                fr, addr = s.recvfrom(65536)
            except BlockingIOError:
                break
            if addr[2] == PACKET_OUTGOING or dropped("rx"):
                continue
            dev.handle_frame(now, fr)
        if dev.txq:
            wake()
    dev.drain = drain

    def flush():
        """Send the queued frames (lock held). A request packet's RTO clock restarts
        when it is handed to the link (MR-MPH-5's "transmit time", AMBIGUITIES #20)."""
        tx, units = dev.txq, dev.txq_units
        dev.txq, dev.txq_units = [], []
        for fr, u in zip(tx, units):
            if dropped("tx"):
                continue
            try:
                s.send(fr)
            except OSError as e:
                print("send:", e, file=sys.stderr)
            if u is not None:
                t = time.monotonic_ns()
                if t > u.tx_ns:
                    u.tx_ns = t
    # Impairment for interop tests on kernels without netem (run-interop.sh --loss):
    # MPNIC_LOSS_PCT drops that share of the frames received and of the frames sent,
    # at random (seed MPNIC_LOSS_SEED), as a lossy link would on either direction.
    loss = float(os.environ.get("MPNIC_LOSS_PCT", "0") or 0) / 100.0
    lrng = random.Random(int(os.environ.get("MPNIC_LOSS_SEED", "1")))
    lost = {"rx": 0, "tx": 0, "rx_total": 0, "tx_total": 0}
    dev.impairment = lost

    def dropped(d):
        lost[d + "_total"] += 1
        if loss and lrng.random() < loss:
            lost[d] += 1
            return True
        return False
    # a timeout that ends at the next timer deadline (a fixed 0.5 ms poll made every
    # timer up to 0.5 ms late); select() because epoll/poll round timeouts up to 1 ms;
    # 20 µs is subtracted for the wake-up latency
    deadline = time.monotonic_ns()
    while not stop.is_set():
        wait = (deadline - time.monotonic_ns() - 20_000) / 1e9
        r, _, _ = select.select([s, rp], [], [], max(0.0, wait))
        if rp in r:
            try:
                os.read(rp, 4096)
            except BlockingIOError:
                pass
        with dev.lock:
            # frames queued while this thread was not running (agent threads, or a
            # descheduled data plane) leave first, before any timer is looked at:
            # otherwise an RTO could fire for a packet that never reached the link
            flush()
            now = time.monotonic_ns()
            # read the socket whether or not select() reported it: frames that came in
            # after select() returned are processed before any timer is looked at
            if True:
                for _ in range(1024):
                    try:
                        fr, addr = s.recvfrom(65536)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING or dropped("rx"):
                        continue
                    try:
                        dev.handle_frame(now, fr)
                    except Exception:
                        import traceback
                        traceback.print_exc()
            try:
                dev.tick(time.monotonic_ns())
            except Exception:
                import traceback
                traceback.print_exc()
            flush()
            deadline = dev.next_deadline(time.monotonic_ns())


def main():
    ap = argparse.ArgumentParser(prog="mpnic")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--iface", required=True)
    sv.add_argument("--ip", default="10.0.0.2")
    sv.add_argument("--mac")
    sv.add_argument("--listen", default="127.0.0.1:7471")
    sv.add_argument("--timers", action="append", default=[], metavar="FILE",
                    help="JSON or YAML (`key: integer` lines) of SPEC §2 MP local "
                         "constants (mp_rto_init, ...; §10.3 units); declared in hello")
    sv.add_argument("--timer", action="append", default=[], metavar="KEY=VALUE",
                    help="one SPEC §2 MP local constant (after --timers)")
    a = ap.parse_args()
    if a.timers or a.timer:
        try:
            timers.apply(timers.load(a.timers, a.timer))
        except timers.TimerError as e:
            ap.exit(2, f"mpnic: error: {e}\n")
    mac = bytes(int(x, 16) for x in a.mac.split(":")) if a.mac else iface_mac(a.iface)
    dev = Device(mac, socket.inet_aton(a.ip))
    dev.profile_trimming = False
    stop = threading.Event()
    t = threading.Thread(target=dataplane, args=(dev, a.iface, stop), daemon=True)
    t.start()
    def on_term(*_):
        imp = getattr(dev, "impairment", None)
        if imp and os.environ.get("MPNIC_LOSS_PCT"):
            print("impairment: dropped %(rx)d of %(rx_total)d frames received, %(tx)d of "
                  "%(tx_total)d frames sent" % imp, file=sys.stderr, flush=True)
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    host, port = a.listen.rsplit(":", 1)
    print(f"mpnic serving on {a.listen}, iface {a.iface}, MP timers declared "
          f"{timers.declared() or 'none (SPEC §10.3 defaults)'}", file=sys.stderr, flush=True)
    serve(Agent(dev), host, int(port))


if __name__ == "__main__":
    main()
