"""Data-parallel training over MPI: hl beside bare mpi4py and PyTorch DDP, same run.

    python bench/distributed.py                      # everything
    python bench/distributed.py --only allreduce     # allreduce, overlap, cnn, resnet18
    python bench/distributed.py --steps 20 --repeat 2

- allreduce: the gradients of a model (float32 tensors of mixed sizes totalling S MB)
  reduced by hl's Reducer as DistOpt drives it (gradients handed over as backward hands
  them out, weight already in them, in 25 MB buckets; wait for all): "hl" with
  gradient_as_bucket_view (DistOpt's default: backward wrote each gradient into its place
  in the buckets, so the step is the add() calls and the reductions), "hl copy" without
  (tensors of 4 MB and more reduced in their own memory, the rest copied into a fused
  bucket), beside one bare mpi4py
  ``Allreduce`` of a contiguous buffer of the same bytes (float32, MPI_SUM, the same MPI;
  the bound), and beside mpi4py reducing the same gradients as a script (or PyTorch DDP,
  by default) does: copied into one buffer, one Allreduce, copied back ("staged"); 2 ranks
  x 1 thread; the median time of each and hl's throughput as a fraction of the others';
  the same for the fastest repetition.
- overlap: the time of one data-parallel step (DistOpt, 2 ranks) beside the same step's
  compute alone (the wrapped optimiser, 1 process, the rank's half batch, 1 thread).
- cnn / resnet18 (bench/train.py's MNIST CNN at global batch 64 and CIFAR-size ResNet-18
  at global batch 32): samples per second of hl on 2 ranks x 1 thread (DistOpt; eagerly,
  and in graph mode: a train_one_batch recorded once and replayed, the bucket reductions
  between the plan's segments), hl in 1 process x 2 threads, and PyTorch DDP (Gloo) on 2
  ranks x 1 thread, each rank on half the global batch (``--copying`` adds hl with
  DistOpt(gradient_as_bucket_view=False), eager and graph mode). Every configuration runs
  in processes of its own, `--repeat` times round the configurations; the figure is the
  median step time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import report, setup, time_steps

HERE = os.path.dirname(os.path.abspath(__file__))
GLOBAL_BATCH = {"cnn": 64, "resnet18": 32}


# ---- workers (one process per rank) -----------------------------------------------------

def allreduce_worker(sizes_mb, repeat):
    import numpy as np
    import hl
    from hl.distributed.buckets import Reducer
    from mpi4py import MPI
    world = hl.distributed.init()  # hl's threads: OMP_NUM_THREADS (1), as every peer's
    out = {}
    for mb in sizes_mb:
        n = int(mb * 1024 * 1024 / 4)
        # a model's gradients: a few big tensors and many small ones
        shares = [0.4, 0.25, 0.15, 0.1] + [0.1 / 16] * 16
        sizes = [max(1, int(n * s)) for s in shares]
        params = [hl.zeros((k,)) for k in sizes]
        grads = [hl.tensor(np.random.default_rng(i).standard_normal(k).astype(np.float32))
                 for i, k in enumerate(sizes)]
        arrays = [g.numpy().copy() for g in grads]
        reducer = Reducer(world, params[::-1])  # copies the gradients in (views off)
        # views on: backward has written the gradients into the buckets (outside the timing)
        viewed = Reducer(world, params[::-1], views=True)
        in_buckets = [viewed.into[id(p)] for p in params]
        for g, v in zip(grads, in_buckets):
            v.numpy()[...] = g.numpy()
        # the same bytes, dtype, op and MPI for every contender
        flat = np.ones(sum(sizes), np.float32)
        staged = np.empty_like(flat)

        def hl_step():
            viewed.start_step()
            for p, g in zip(params[::-1], in_buckets[::-1]):
                viewed.add(p, g, owned=True)
            viewed.finish()

        def hl_copy():
            reducer.start_step()
            for p, g in zip(params[::-1], grads[::-1]):
                reducer.add(p, g, owned=True)
            reducer.finish()

        def mpi_bare():  # the bound: one call on bytes that already lie contiguous
            world.data.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)

        def mpi_staged():  # what a script reducing a model's gradients with mpi4py does
            at = 0            # (and PyTorch DDP by default): copy in, one call, copy out
            for a in arrays:
                staged[at:at + a.size] = a
                at += a.size
            world.data.Allreduce(MPI.IN_PLACE, staged, op=MPI.SUM)
            at = 0
            for a in arrays:
                a[...] = staged[at:at + a.size]
                at += a.size
        # where hl's time goes: its MPI calls alone (bare Allreduces of its buckets' sizes,
        # in its order), and its add() calls alone (the copies into buckets and the Python
        # around them, on a second Reducer whose buckets never start)
        pieces = [np.ones(int(b.offsets[-1]), np.float32) for b in viewed.buckets]
        quiet = Reducer(world, params[::-1], views=True)
        quiet._start_now = lambda b: None
        quiet_grads = [quiet.into[id(p)] for p in params]

        def mpi_hl_calls():
            for piece in pieces:
                world.data.Allreduce(MPI.IN_PLACE, piece, op=MPI.SUM)

        def hl_adds():
            quiet.start_step()
            for p, g in zip(params[::-1], quiet_grads[::-1]):
                quiet.add(p, g, owned=True)
        contenders = {"hl": hl_step, "mpi4py": mpi_bare, "mpi4py_staged": mpi_staged,
                      "hl_copy": hl_copy, "hl_calls": mpi_hl_calls, "hl_adds": hl_adds}
        times = {k: [] for k in contenders}
        for _ in range(repeat):
            for k, fn in contenders.items():
                world.data.Barrier()
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
        out[str(mb)] = {k: statistics.median(v) for k, v in times.items()}
        out[str(mb)].update({k + "_min": min(v) for k, v in times.items()})
        out[str(mb)]["buckets"] = [
            f"{'solo' if b.solo else 'fused'} {int(b.offsets[-1]) * 4 / 2**20:.2f} MB"
            for b in viewed.buckets]
        out[str(mb)]["copy_buckets"] = [
            f"{'solo' if b.solo else 'fused'} {int(b.offsets[-1]) * 4 / 2**20:.2f} MB"
            for b in reducer.buckets]
    if world.rank == 0:
        report(out)


def train_worker(lib, name, steps, warmup, per_rank_batch):
    """One rank (or the lone process) of a training configuration; rank 0 reports the
    step times."""
    sys.path.insert(0, HERE)
    import numpy as np
    from train import MODELS
    _, shape, _ = MODELS[name]
    rng = np.random.default_rng(int(os.environ.get("PMI_RANK", "0")))
    xs = rng.standard_normal((per_rank_batch, *shape)).astype(np.float32)
    ys = rng.integers(0, 10, per_rank_batch).astype(np.int64)
    if lib == "torch-ddp":
        step, rank = _torch_ddp(name, xs, ys)
    else:
        step, rank = _hl(name, xs, ys, distributed=lib.startswith("hl-dist"),
                         graph=lib.endswith("-graph"), views="-copy" not in lib)
    times = time_steps(step, steps, warmup)
    if rank == 0:
        report({"times": times})


def _hl(name, xs, ys, distributed, graph=False, views=True):
    import hl
    from train import hl_model
    hl.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    hl.manual_seed(0)
    x, y = hl.tensor(xs), hl.tensor(ys)
    opt = hl.opt.SGD(lr=0.01, momentum=0.9)
    if distributed:
        opt = hl.opt.DistOpt(opt, gradient_as_bucket_view=views)
    if graph:  # a Module's train_one_batch, recorded once and replayed (bench/graph.py's)
        class Net(hl.Module):
            def __init__(self):
                super().__init__()
                self.net = hl_model(name)
                self.optim = opt

            def forward(self, x):
                return self.net(x)

            def train_one_batch(self, x, y):
                loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
                self.optim.backward_and_update(loss)
                return loss
        net = Net()
        net.compile([hl.Placeholder(x.shape)], is_train=True, use_graph=True)
        return (lambda: net.train_one_batch(x, y)), hl.distributed.rank()
    model = hl_model(name)
    model.train()
    model(hl.Placeholder(x.shape))

    def step():
        loss = hl.losses.softmax_cross_entropy(model(x), y)
        opt.backward_and_update(loss)
    return step, hl.distributed.rank()


def _torch_ddp(name, xs, ys):
    import torch
    import torch.distributed as dist
    from train import torch_model
    torch.set_num_threads(1)
    rank, size = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch_model(name))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.tensor(xs), torch.tensor(ys)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    return step, rank


# ---- the driver -------------------------------------------------------------------------

def _launch(ranks, threads, args, port=None):
    """Runs this script as a worker: on `ranks` ranks with mpiexec, or alone (ranks=None)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if os.environ.get("HL_BENCH_PASSIVE"):  # on a shared, overloaded host OpenMP's spinning
        env["OMP_WAIT_POLICY"] = "PASSIVE"   # threads lose whole time slices to each other
    if port is not None:
        env["MASTER_PORT"] = str(port)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + [str(a) for a in args]
    if ranks is not None:
        from hl.distributed.launch import find_mpiexec
        cmd = [find_mpiexec(), "-n", str(ranks)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"worker {args} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.split("RESULT ", 1)[1].splitlines()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="allreduce,overlap,cnn,resnet18")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--sizes", default="1,4,25,100")
    ap.add_argument("--copying", action="store_true",
                    help="also train with gradient_as_bucket_view=False (copies into buckets)")
    ap.add_argument("--worker", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    setup(None)
    if a.worker:
        kind, rest = a.worker[0], a.worker[1:]
        if kind == "allreduce":
            allreduce_worker([float(s) for s in rest[0].split(",")], int(rest[1]))
        else:
            train_worker(kind, rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
        return
    import platform
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    print(f"CPU: {cpu}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    only = a.only.split(",")
    if "allreduce" in only:
        # the median, and the fastest of the repetitions: on a host shared with other work
        # every collective waits for both ranks to be scheduled, and the fastest run is the
        # one least disturbed by that (the nearest to an idle host's figure)
        print("\nallreduce, 2 ranks, float32 MPI_SUM: hl buckets vs one bare mpi4py Allreduce "
              "of the same bytes (the bound), and mpi4py copying the gradients into one "
              "buffer and back around its Allreduce (30 each, interleaved)")
        print(f"{'MB':>6} {'hl ms':>8} {'mpi4py':>8} {'staged':>8} {'hl GB/s':>8} "
              f"{'vs bare':>7} {'vs staged':>9}   {'fastest: hl':>11} {'mpi4py':>8} "
              f"{'vs bare':>7}   {'hl copy':>8} {'vs bare':>7}")
        runs = [_launch(2, 1, ["allreduce", a.sizes, 30]) for _ in range(a.repeat)]
        for mb in a.sizes.split(","):
            key = str(float(mb))
            h, m, st = (statistics.median(r[key][k] for r in runs)
                        for k in ("hl", "mpi4py", "mpi4py_staged"))
            hm, mm = (min(r[key][k + "_min"] for r in runs) for k in ("hl", "mpi4py"))
            hc = statistics.median(r[key]["hl_copy"] for r in runs)
            print(f"{mb:>6} {h * 1e3:8.2f} {m * 1e3:8.2f} {st * 1e3:8.2f} "
                  f"{float(mb) / 1024 / h:8.2f} {m / h:6.2f}x {st / h:8.2f}x   "
                  f"{hm * 1e3:11.2f} {mm * 1e3:8.2f} {mm / hm:6.2f}x   "
                  f"{hc * 1e3:8.2f} {m / hc:6.2f}x")
        print("\nwhere hl's time goes (medians, ms): its MPI calls alone (bare Allreduces of "
              "its buckets' sizes), its add() calls alone (copies into buckets + Python), "
              "and the rest (hand-over to the communication thread, waits, polling)")
        print(f"{'MB':>6} {'hl':>8} {'calls':>8} {'adds':>8} {'rest':>8}   buckets")
        for mb in a.sizes.split(","):
            key = str(float(mb))
            h, c, ad = (statistics.median(r[key][k] for r in runs)
                        for k in ("hl", "hl_calls", "hl_adds"))
            print(f"{mb:>6} {h * 1e3:8.3f} {c * 1e3:8.3f} {ad * 1e3:8.3f} "
                  f"{(h - c - ad) * 1e3:8.3f}   {', '.join(runs[0][key]['buckets'])} "
                  f"(copying: {', '.join(runs[0][key]['copy_buckets'])})")
    port = 29400
    for name in [m for m in ("cnn", "resnet18") if m in only or "overlap" in only]:
        B = GLOBAL_BATCH[name]
        configs = {"hl 2 ranks x 1 thread": (2, 1, "hl-dist", B // 2),
                   "hl 2 ranks x 1 thread, graph mode": (2, 1, "hl-dist-graph", B // 2),
                   "hl 1 process x 2 threads": (None, 2, "hl", B),
                   "PyTorch DDP (Gloo) 2 ranks x 1 thread": (2, 1, "torch-ddp", B // 2)}
        if a.copying:  # DistOpt(gradient_as_bucket_view=False): the gradients copied in
            configs["hl 2 ranks x 1 thread, copying"] = (2, 1, "hl-dist-copy", B // 2)
            configs["hl 2 ranks x 1 thread, graph mode, copying"] = \
                (2, 1, "hl-dist-copy-graph", B // 2)
        if "overlap" in only:
            configs["hl compute alone (1 process, half batch, 1 thread)"] = \
                (None, 1, "hl", B // 2)
        times = {k: [] for k in configs}
        for _ in range(a.repeat):
            for label, (ranks, threads, lib, batch) in configs.items():
                port += 1
                r = _launch(ranks, threads, [lib, name, a.steps, a.warmup, batch], port)
                times[label] += r["times"]
        med = {k: statistics.median(v) for k, v in times.items()}
        ddp = med["PyTorch DDP (Gloo) 2 ranks x 1 thread"]
        print(f"\n{name}, global batch {B} (median step; samples/s; vs PyTorch DDP)")
        for label, t in med.items():
            print(f"  {label:<52} {t * 1e3:8.1f} ms {B / t if 'half' not in label else B / 2 / t:8.0f}/s "
                  f"{ddp / t:6.2f}x")
        if "overlap" in only:
            alone = med["hl compute alone (1 process, half batch, 1 thread)"]
            print(f"  overlap: a data-parallel step takes {med['hl 2 ranks x 1 thread'] / alone:.2f}x "
                  f"its compute alone")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
