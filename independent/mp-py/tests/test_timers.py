"""serve --timers / --timer: parsing, SPEC §10.3 range errors, what hello declares."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
from mpnic import timers  # noqa: E402
from mpnic.device import Cfg, Device, QP, US  # noqa: E402
from mpnic.agent import Agent  # noqa: E402

X10 = os.path.join(HERE, "timers", "x10.yaml")


def hello_profile():
    ag = Agent(Device(bytes.fromhex("020000000002"), bytes([10, 0, 0, 2])))
    rep, _ = ag.handle_line(json.dumps({"id": 1, "op": "hello", "v": 1}).encode())
    assert rep["ok"], rep
    return rep["profile"]


class Timers(unittest.TestCase):
    def setUp(self):
        self.saved = {a: getattr(Cfg, a) for a in
                      [attr for attr, _, _ in timers.KEYS.values()] + ["cwnd_init"]}

    def tearDown(self):
        for a, v in self.saved.items():
            setattr(Cfg, a, v)

    def err(self, given, *words):
        with self.assertRaises(timers.TimerError) as c:
            timers.resolve(given, "f.yaml")
        for w in ("f.yaml",) + words:
            self.assertIn(w, str(c.exception))

    def test_yaml_and_json_parse_alike(self):
        y = timers.parse_text("# c\nmp_rto_init: 20000   # µs\n\nmp_rto_min: 0x3e8\n", "a")
        j = timers.parse_text('{"mp_rto_init": 20000, "mp_rto_min": 1000}', "b")
        self.assertEqual(y, j)
        self.assertEqual(timers.parse_assign("mp_retire_hold=700"), {"mp_retire_hold": 700})

    def test_syntax_errors_name_the_place(self):
        for text, where in (("mp_rto_init 5\n", "a:1"), ("{nope", "a: not valid JSON"),
                            ("mp_rto_min: 1\nmp_rto_min: 2\n", "a:2"), ("[1]", "a")):
            with self.assertRaises(timers.TimerError) as c:
                timers.resolve(timers.parse_text(text, "a"), "a")
            self.assertIn(where, str(c.exception))
        with self.assertRaises(timers.TimerError):
            timers.parse_assign("mp_rto_min")
        with self.assertRaises(timers.TimerError):
            timers.parse_assign("mp_rto_min=1ms")

    def test_unknown_key_and_non_integer(self):
        self.err({"mp_cwnd_init": 4096}, "mp_cwnd_init", "not an MP local constant")
        self.err({"mp_rto_min": "fast"}, "mp_rto_min", "not an integer")
        self.err({"mp_rto_min": True}, "mp_rto_min", "not an integer")

    def test_ranges(self):
        self.err({"mp_reorder_threshold": 65}, "mp_reorder_threshold", "1–64")
        self.err({"mp_ack_coalesce_time": 80}, "mp_ack_coalesce_time", "1–64")
        self.err({"mp_ack_prompt_max": 0}, "mp_ack_prompt_max", "1–50")
        self.err({"mp_rto_min": 9}, "mp_rto_min", "10–10000")
        self.err({"mp_rto_max": 999}, "mp_rto_max", "1000–1000000")
        self.err({"mp_rto_min": 5000, "mp_rto_max": 2000}, "mp_rto_init", "5000–2000")
        self.err({"mp_rto_init": 20000, "mp_rto_max": 10000}, "mp_rto_init", "100–10000")
        self.err({"mp_retire_hold": 1000001}, "mp_retire_hold", "10–1000000")
        self.err({"mp_retire_hold": 9000, "mp_retire_hold_max": 8000},
                 "mp_retire_hold_max", "9000–10000000")
        self.err({"mp_cwnd_max": 4095}, "mp_cwnd_max", "4096–67108864")
        self.err({"mp_cwnd_max": 67108865}, "mp_cwnd_max")
        # the ends of each range are legal
        timers.resolve({"mp_rto_min": 10, "mp_rto_max": 1000000, "mp_rto_init": 10,
                        "mp_ack_prompt_max": 50, "mp_reorder_threshold": 1,
                        "mp_retire_hold": 10, "mp_retire_hold_max": 10000000,
                        "mp_cwnd_max": 67108864}, "f")

    def test_undeclared_move_into_the_range_the_declared_leave(self):
        eff = timers.resolve({"mp_rto_min": 2000}, "f")
        self.assertEqual(eff["mp_rto_init"], 2000)
        eff = timers.resolve({"mp_retire_hold": 100000}, "f")
        self.assertEqual(eff["mp_retire_hold_max"], 100000)
        self.assertEqual(timers.resolve({}, "f"), timers.DEFAULTS)

    def test_hello_declares_what_runs(self):
        self.assertFalse(set(timers.KEYS) & set(hello_profile()), "defaults: no timer keys")
        timers.apply(timers.load([X10]))
        prof = hello_profile()
        self.assertEqual(prof["mp_rto_init"], 10000)
        self.assertEqual(prof["mp_retire_hold_max"], 640000)
        self.assertEqual(prof["mp_ack_coalesce_time"], 64)
        self.assertNotIn("mp_reorder_threshold", prof)   # left at its default
        for k, v in timers.running().items():
            self.assertEqual(prof.get(k, timers.DEFAULTS[k]), v, k)
        # and the device runs with them: a QP's RTO before its first sample
        qp = QP(Device(bytes(6), bytes(4)), 1, None, "rc", None, None, False, {})
        self.assertEqual(qp.rto(), 10000 * US)
        self.assertEqual(Cfg.rto_init, 10000 * US)
        self.assertEqual(Cfg.retire_hold, 5000 * US)

    def test_cwnd_init_follows_a_small_cwnd_max(self):
        timers.apply(timers.resolve({"mp_cwnd_max": 65536}, "f"))
        self.assertEqual(Cfg.cwnd_init, 65536)
        self.assertEqual(hello_profile()["mp_cwnd_max"], 65536)

    def test_serve_rejects_a_bad_value_before_opening_the_link(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("mp_rto_init: 20000\nmp_rto_max: 10000\n")
        try:
            r = subprocess.run([sys.executable, "-m", "mpnic", "serve", "--iface", "lo",
                                "--timers", f.name], cwd=HERE, capture_output=True,
                               text=True, timeout=30)
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f.name, r.stderr)
        self.assertIn("mp_rto_init: 20000 (given) is outside its SPEC §10.3 range 100–10000",
                      r.stderr)
        r = subprocess.run([sys.executable, "-m", "mpnic", "serve", "--iface", "lo",
                            "--timer", "mp_rto_min=5"], cwd=HERE, capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--timer: mp_rto_min: 5", r.stderr)


class ProbeSchedule(unittest.TestCase):
    """MR-MPF-3: first probe mp_retire_hold after retirement, then each unanswered
    probe followed by twice the previous wait (at most mp_retire_hold_max)."""

    def probe_times(self, hold, hold_max, until):
        from tests.test_device import setup
        dev, _, _, _, qpn = setup()
        qp = dev.qps[qpn]
        qp.srtt, qp.rttvar = 10 * US, 5 * US      # RTO = rto_min: below every wait here
        t0 = 1_000_000_000
        saved = Cfg.retire_hold, Cfg.retire_hold_max
        Cfg.retire_hold, Cfg.retire_hold_max = hold * US, hold_max * US
        try:
            dev.retire(t0, qp, qp.evs[0])
            out, n = [], 0
            for t in range(t0, t0 + until * US + 1, 10 * US):   # bounded: until / 10 µs ticks
                dev.tick(t)
                if dev.counters["mp_probes_sent"] != n:
                    n = dev.counters["mp_probes_sent"]
                    out.append((t - t0) // US)
            return out
        finally:
            Cfg.retire_hold, Cfg.retire_hold_max = saved

    def test_doubling_starts_after_the_first_probe(self):
        # waits 500, 1000, 2000, 4000, then capped at 5000
        self.assertEqual(self.probe_times(500, 5000, 20000),
                         [500, 1500, 3500, 7500, 12500, 17500])

    def test_declared_hold(self):
        self.assertEqual(self.probe_times(5000, 640000, 40000), [5000, 15000, 35000])


if __name__ == "__main__":
    unittest.main()
