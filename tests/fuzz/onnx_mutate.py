"""A mutation fuzzer for hl's ONNX importer and runtime (issue 17).

    python tests/fuzz/onnx_mutate.py --cases 500 --seed 1        # prints a summary
    python tests/fuzz/onnx_mutate.py --cases 50 --models resnet18,gpt2

Each case takes a zoo model (../shared/onnx-zoo), mutates it (byte flips of the file, or a
structured change: an attribute's ints or floats, a tensor's dims or data type, an op type, an
input dropped or renamed, a name's bytes made invalid UTF-8), then imports it and runs it on the
zoo's stored inputs in a forked child with a memory cap (RLIMIT_AS) and a time limit. The
outcome of a case is one of
    ok        it ran
    hl        an hl.errors exception (the expected answer to a broken model)
    python    any other exception: a bug (printed with its traceback)
    crash     the child died on a signal: a bug
    hang      past the time limit: a bug
The driver imports hl but runs nothing before forking (libgomp's threads do not survive a
fork), and exits 1 if any case was python, crash or hang.
"""
import argparse
import json
import os
import random
import resource
import signal
import sys
import time
import traceback

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "onnx-zoo"))
if not os.path.isdir(ZOO):
    ZOO = "/work/shared/onnx-zoo"
MODELS = ["resnet18", "mobilenet_v2", "shufflenet_v2", "emotion_ferplus", "tiny_yolov2",
          "bert_squad", "gpt2", "lstm_classifier", "vgg16", "arcface", "roberta"]


def _flip_bytes(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(data))
        flip = data[pos] ^ (1 << rng.randrange(8))
        data[pos] = rng.randrange(256) if rng.random() < 0.7 else flip
    return bytes(data)


_BAD_UTF8_MARK = b"\x01BADUTF\x01"
_BAD_UTF8 = b"\xff\xfe\xc3(\x80\xff\xc0\xaf"  # as long as the mark: lengths stay valid


def _structured(model, rng):
    """One structured mutation of a ModelProto (in place); returns its description."""
    g = model.graph
    nodes = list(g.node)
    node = rng.choice(nodes) if nodes else None
    kind = rng.choice(["attr_int", "attr_float", "dims", "dtype", "op_type", "drop_input",
                       "rename_input", "bad_utf8", "attr_int", "dims"])
    if kind in ("attr_int", "attr_float") and node is not None and node.attribute:
        a = rng.choice(list(node.attribute))
        big = [0, -1, 1, 2, -2, 3, 7, 2 ** 31 - 1, -2 ** 31, 2 ** 40, 10 ** 9]
        if a.ints:
            i = rng.randrange(len(a.ints))
            a.ints[i] = rng.choice(big)
        elif a.type == onnx.AttributeProto.INT:
            a.i = rng.choice(big)
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30, -1e-30])
        elif a.floats:
            a.floats[rng.randrange(len(a.floats))] = rng.choice([0.0, float("nan"), -1e30])
        return f"{kind} {node.op_type}.{a.name}"
    if kind == "dims" and g.initializer:
        t = rng.choice(list(g.initializer))
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 3, 10 ** 6, 2 ** 40, -1])
        return f"dims {t.name}"
    if kind == "dtype" and g.initializer:
        t = rng.choice(list(g.initializer))
        t.data_type = rng.choice([0, 2, 3, 6, 7, 8, 9, 10, 11, 16, 17, 99])
        return f"dtype {t.name} -> {t.data_type}"
    if kind == "op_type" and node is not None:
        node.op_type = rng.choice(["Pad", "Reshape", "Expand", "Tile", "ConstantOfShape",
                                   "LpPool", "Resize", "Gather", "Conv", "Range", "Slice",
                                   "TopK", "OneHot", "Unknown"])
        return f"op_type -> {node.op_type}"
    if kind == "drop_input" and node is not None and node.input:
        del node.input[rng.randrange(len(node.input))]
        return f"drop_input {node.op_type}"
    if kind == "rename_input" and node is not None and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(["", "missing", g.input[0].name])
        return f"rename_input {node.op_type}"
    if node is not None:
        node.name = _BAD_UTF8_MARK.decode()  # made invalid UTF-8 after serialising
        return "bad_utf8 name"
    return "none"


def make_case(name, seed):
    """(description, model bytes, feeds) for case `seed` of model `name`."""
    rng = random.Random(seed)
    path = os.path.join(ZOO, f"{name}-op{rng.choice([11, 17])}.onnx")
    with open(path, "rb") as f:
        data = f.read()
    stored = np.load(os.path.join(ZOO, f"{name}.npz"))
    feeds = {k[3:]: stored[k] for k in stored.files if k.startswith("in_")}
    if rng.random() < 0.4:
        return f"{name} flips", _flip_bytes(data, rng), feeds
    model = onnx.load_from_string(data)
    what = [_structured(model, rng) for _ in range(rng.randint(1, 3))]
    try:
        data = model.SerializeToString().replace(_BAD_UTF8_MARK, _BAD_UTF8)
    except Exception:  # noqa: BLE001 - an unserialisable mutation: flip bytes instead
        data = _flip_bytes(data, rng)
    return f"{name} {'; '.join(what)}", data, feeds


def _child(data, feeds, mem_bytes, write_fd):
    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    import hl.errors
    import hl.onnx
    outcome, detail = "ok", ""
    try:
        rep = hl.onnx.prepare(data)
        rep.run(feeds)
    except hl.errors.HLError as e:
        outcome, detail = "hl", f"{type(e).__name__}: {str(e)[:200]}"
    except BaseException as e:  # noqa: BLE001 - what the fuzzer is looking for
        outcome, detail = "python", "".join(traceback.format_exception(e))[-3000:]
    os.write(write_fd, json.dumps([outcome, detail]).encode())
    os._exit(0)


def run_case(data, feeds, mem_bytes=2 << 30, timeout=60):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            _child(data, feeds, mem_bytes, w)
        finally:
            os._exit(3)
    os.close(w)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return "hang", f"over {timeout} s"
        time.sleep(0.01)
    raw = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        raw += chunk
    os.close(r)
    if os.WIFSIGNALED(status):
        return "crash", f"signal {os.WTERMSIG(status)}"
    if not raw:
        return "crash", f"exit status {os.WEXITSTATUS(status)} without a report"
    return tuple(json.loads(raw))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--mem-gib", type=float, default=2)
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import hl.onnx  # noqa: F401 - imported once, before forking; nothing run
    models = args.models.split(",")
    counts, bad = {}, []
    for i in range(args.cases):
        seed = args.seed * 1_000_003 + i
        what, data, feeds = make_case(models[i % len(models)], seed)
        outcome, detail = run_case(data, feeds, int(args.mem_gib * (1 << 30)), args.timeout)
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome in ("python", "crash", "hang"):
            bad.append((seed, what, outcome, detail))
            print(f"BUG seed={seed} {what}: {outcome}\n{detail}", flush=True)
    print(json.dumps({"cases": args.cases, "outcomes": counts, "bugs": len(bad)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
