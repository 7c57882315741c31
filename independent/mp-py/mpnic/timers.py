"""The MP local constants an mpnic instance runs with (SPEC §2 profile keys, §10.3).

`python -m mpnic serve --timers FILE` (JSON, or YAML with one `key: integer` per
line) and `--timer KEY=VALUE` set them; each key is a SPEC §2 MP local constant in
the unit of §10.3 (µs, PSNs, bytes). A key outside the nine, a value that is not an
integer, or a value outside its §10.3 range is a TimerError naming the key and where
it came from. A constant not given keeps its §10.3 default, moved into the range the
given ones leave (SPEC §2: `mp_rto_min: 2000` alone makes `mp_rto_init` 2000).
`apply` sets them on `device.Cfg`; `declared` reads back from `Cfg` what `hello`
declares: every key whose running value is not the §10.3 default.
"""
import json

from .device import Cfg, US

# key -> (Cfg attribute, scale from the §10.3 unit to Cfg's, §10.3 default)
KEYS = {
    "mp_reorder_threshold": ("K", 1, 32),
    "mp_ack_coalesce_time": ("coalesce_time", US, 8),
    "mp_ack_prompt_max": ("ack_prompt_max", US, 4),
    "mp_rto_init": ("rto_init", US, 1000),
    "mp_rto_min": ("rto_min", US, 100),
    "mp_rto_max": ("rto_max", US, 16000),
    "mp_retire_hold": ("retire_hold", US, 500),
    "mp_retire_hold_max": ("retire_hold_max", US, 64000),
    "mp_cwnd_max": ("cwnd_max", 1, 786432),
}
DEFAULTS = {k: d for k, (_, _, d) in KEYS.items()}
# The largest PMTU mpnic's profile allows (`max_pmtu`): `mp_cwnd_max` must be at
# least 1 PMTU (§10.3) for every QP, so at least this one (AMBIGUITIES 45).
MAX_PMTU = 4096
CWND_INIT = 524288   # §10.3 default `mp_cwnd_init` (1 PMTU–`mp_cwnd_max`)


# checking order: a key before those whose range it bounds
ORDER = ("mp_reorder_threshold", "mp_ack_coalesce_time", "mp_ack_prompt_max", "mp_rto_min",
         "mp_rto_max", "mp_rto_init", "mp_retire_hold", "mp_retire_hold_max", "mp_cwnd_max")


class TimerError(ValueError):
    pass


def _fixed_range(key, eff):
    """The §10.3 range of KEY given the other effective values."""
    return {
        "mp_reorder_threshold": (1, 64),
        "mp_ack_coalesce_time": (1, 64),
        "mp_ack_prompt_max": (1, 50),
        "mp_rto_min": (10, 10000),
        "mp_rto_max": (1000, 1000000),
        "mp_rto_init": (eff["mp_rto_min"], eff["mp_rto_max"]),
        "mp_retire_hold": (10, 1000000),
        "mp_retire_hold_max": (eff["mp_retire_hold"], 10000000),
        "mp_cwnd_max": (MAX_PMTU, 67108864),
    }[key]


def parse_text(text, where):
    """A mapping of keys to values from JSON or a flat YAML file (`key: 123` lines,
    `#` comments). Only the syntax is checked here; `resolve` checks keys and values."""
    s = text.strip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as e:
            raise TimerError(f"{where}: not valid JSON: {e}") from None
        if not isinstance(obj, dict):
            raise TimerError(f"{where}: expected an object of SPEC §2 keys")
        return obj
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if ":" not in line or line[0] in " \t-":
            raise TimerError(f"{where}:{n}: expected `key: integer`, got {line.strip()!r}")
        k, v = (x.strip() for x in line.split(":", 1))
        if k in out:
            raise TimerError(f"{where}:{n}: {k} given twice")
        try:
            out[k] = int(v, 0) if v else v
        except ValueError:
            out[k] = v
    return out


def parse_assign(text, where="--timer"):
    """KEY=VALUE from the command line."""
    if "=" not in text:
        raise TimerError(f"{where} {text!r}: expected KEY=VALUE")
    k, v = text.split("=", 1)
    try:
        return {k.strip(): int(v.strip(), 0)}
    except ValueError:
        raise TimerError(f"{where} {k.strip()}: {v.strip()!r} is not an integer") from None


def resolve(given, where):
    """The nine effective values from the given ones (checked) and the defaults."""
    for k, v in given.items():
        if k not in KEYS:
            raise TimerError(f"{where}: {k!r} is not an MP local constant of SPEC §2 "
                             f"(one of {', '.join(KEYS)})")
        if isinstance(v, bool) or not isinstance(v, int):
            raise TimerError(f"{where}: {k}: {v!r} is not an integer")
    eff = dict(DEFAULTS)
    eff.update(given)
    # undeclared constants whose §10.3 range depends on declared ones move into it
    for k in ("mp_rto_init", "mp_retire_hold_max"):
        if k not in given:
            lo, hi = _fixed_range(k, eff)
            eff[k] = min(max(eff[k], lo), hi)
    for k in ORDER:
        lo, hi = _fixed_range(k, eff)
        if not lo <= eff[k] <= hi:
            src = "given" if k in given else "default"
            raise TimerError(f"{where}: {k}: {eff[k]} ({src}) is outside its SPEC §10.3 "
                             f"range {lo}–{hi}")
    return eff


def apply(eff):
    """Make the device run with EFF (the process-wide `Cfg`)."""
    for k, (attr, scale, _) in KEYS.items():
        setattr(Cfg, attr, eff[k] * scale)
    Cfg.cwnd_init = min(CWND_INIT, Cfg.cwnd_max)


def running():
    """The nine values `Cfg` holds now, in §10.3 units."""
    return {k: getattr(Cfg, attr) // scale for k, (attr, scale, _) in KEYS.items()}


def declared():
    """What `hello` declares: each constant whose running value is not the default."""
    return {k: v for k, v in running().items() if v != DEFAULTS[k]}


def load(files=(), assigns=()):
    """Read, merge (later wins) and check --timers FILEs and --timer KEY=VALUEs."""
    given, where = {}, []
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise TimerError(f"--timers {path}: {e.strerror}") from None
        given.update(parse_text(text, path))
        where.append(path)
    for a in assigns:
        given.update(parse_assign(a))
        where.append("--timer")
    return resolve(given, " + ".join(where) or "timers")
