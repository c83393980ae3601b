"""What Redis spends on each write-behind batch, read from its SLOWLOG (`cluster_bench.py --slowlog`).

With `slowlog-log-slower-than 0` Redis logs every command with the microseconds it ran and its
arguments (the first 31, then "... (N more arguments)"), so each batch script call
(`WriteBehindStoreScript`) is seen with its cost and its size: its keys are five per session
(`dt:session:{id}:meta`, ...) and its arguments 4 + 3 per session + 4 per frame. A least-squares
fit of µs against sessions and frames gives the cost per call, per session and per frame (when
batches carry one frame per session the two are collinear and the fit says nothing). Redis 7
logs the commands a script calls too, which makes the scripts' times larger than without the
slowlog: read them as shares.
"""
import re
import socket

MAX_LEN = 1000000


def _command(port, *words):
    """One command over a fresh connection, its RESP reply parsed."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        out = b"*%d\r\n" % len(words) + b"".join(
            b"$%d\r\n%s\r\n" % (len(w), w) for w in (str(x).encode() for x in words))
        sock.sendall(out)
        reader = sock.makefile("rb")
        return _read(reader)


def _read(reader):
    line = reader.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = reader.read(size + 2)[:-2]
        return data
    if kind == b"*":
        size = int(rest)
        return None if size < 0 else [_read(reader) for _ in range(size)]
    raise ValueError(f"unexpected RESP {line!r}")


def start(port):
    _command(port, "CONFIG", "SET", "slowlog-max-len", MAX_LEN)
    _command(port, "CONFIG", "SET", "slowlog-log-slower-than", 0)
    _command(port, "SLOWLOG", "RESET")


def _batch_size(args):
    """(sessions, frames) when `args` is a batch script's EVALSHA, else None."""
    if len(args) < 4 or args[0].upper() != b"EVALSHA":
        return None
    keys = int(args[2])
    if keys == 0 or keys % 5 or not args[3].endswith(b":meta") or b"dt:session:" not in args[3]:
        return None
    total = len(args)
    if args[-1].startswith(b"... (") and args[-1].endswith(b"more arguments)"):
        total = len(args) - 1 + int(args[-1].split(b"(")[1].split()[0])
    sessions = keys // 5
    frames = (total - 3 - keys - 4 - 3 * sessions) // 4
    return sessions, frames


def summary(port):
    """The batch calls' count, means and fit; the other commands' count and µs by name."""
    entries = _command(port, "SLOWLOG", "GET", MAX_LEN) or []
    by_script = {}
    others = {}
    for entry in entries:
        micros, args = entry[2], entry[3]
        size = _batch_size(args)
        if size:
            by_script.setdefault(args[1], []).append((micros, size[0], size[1], entry[1]))
        else:
            name = args[0].decode().upper() if args else "?"
            if name == "EVALSHA" and len(args) > 3:
                # By its first key's shape (ids taken out): which script it is.
                shape = re.sub(rb"\{[^}]*\}", b"{}", args[3]).decode(errors="replace")
                name += f"/{int(args[2])}keys/{shape}"
            count, total = others.get(name, (0, 0))
            others[name] = (count + 1, total + micros)
    # The batch script is the one whose calls carry frames (another script with five keys per
    # session, the open's, carries none).
    scripts = sorted(by_script.values(), key=lambda calls: -sum(c[2] for c in calls))
    batches = [c[:3] for c in scripts[0]] if scripts else []
    for calls in scripts[1:]:
        others["EVALSHA/5keys-other"] = (len(calls), sum(c[0] for c in calls))
    result = {"slowlogEntries": len(entries), "truncated": len(entries) >= MAX_LEN, "batches": len(batches)}
    if batches:
        stamps = [c[3] for c in scripts[0]]
        result["batchesPerSecond"] = len(batches) / (max(stamps) - min(stamps) + 1)
        n = len(batches)
        micros = sum(b[0] for b in batches)
        sessions = sum(b[1] for b in batches)
        frames = sum(b[2] for b in batches)
        result.update(batchMicros=micros, meanMicros=micros / n, meanSessions=sessions / n, meanFrames=frames / n,
                      frames=frames, microsPerFrame=micros / max(1, frames),
                      fit=_fit(batches), framesHistogram=_histogram([b[2] for b in batches]))
    result["others"] = {k: {"calls": c, "usPerCall": round(t / c, 1)} for k, (c, t) in
                        sorted(others.items(), key=lambda kv: -kv[1][1])[:12]}
    return result


def _histogram(values):
    edges = [1, 2, 3, 5, 8, 13, 21, 34, 1 << 30]
    counts = [0] * len(edges)
    for v in values:
        for i, edge in enumerate(edges):
            if v <= edge:
                counts[i] += 1
                break
    labels = ["1", "2", "3", "4-5", "6-8", "9-13", "14-21", "22-34", "35+"]
    return dict(zip(labels, counts))


def _fit(batches):
    """Least squares µs = a + b·sessions + c·frames (normal equations, 3×3)."""
    rows = [(1.0, float(s), float(f), float(m)) for m, s, f in batches]
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    atb = [sum(r[i] * r[3] for r in rows) for i in range(3)]
    try:
        solution = _solve(ata, atb)
    except ZeroDivisionError:
        return None
    return {"perCall": round(solution[0], 2), "perSession": round(solution[1], 2), "perFrame": round(solution[2], 2)}


def _solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-12:
            raise ZeroDivisionError
        for r in range(n):
            if r != col:
                factor = m[r][col] / m[col][col]
                m[r] = [x - factor * y for x, y in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] for i in range(n)]
