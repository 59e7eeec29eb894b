"""Peak memory and step time of a training step in graph mode beside the same step eagerly, one
process per model (issue 20, item 5). The step is bench/graph.py's: an hl.Module's
train_one_batch (forward, softmax cross-entropy, backward, SGD with momentum), compiled with
use_graph=False for eager and use_graph=True for graph mode (the plan users get).

Peak: hl.memory_stats()['peak'] (bytes handed to tensors: the caching allocator's blocks as
given out, plan arenas and kernels' work buffers included) over the timed steps after warm-up,
hl.reset_peak_memory_stats() first. The eager model is measured, then dropped, then the graph
model built: each peak counts one model's parameters, optimiser slots and batch.

    python bench/graph_memory.py [--only cnn,resnet18] [--threads 1] [--steps 3]

ResNet-18 steps take seconds each on a loaded two-core machine: --steps 1 keeps the run to a
few minutes.
"""
import argparse
import gc
import statistics

import _common

# eager: one step builds the optimiser's slots; graph: eager, recorded (the first replay
# measures kernel scratch), then a replay that plans memory. Timed steps come after.
WARMUP = {"eager": 2, "graph": 3}


def _run(name, steps, graph):
    import hl
    from graph import hl_step_fn
    from train import MODELS
    batch, shape, _ = MODELS[name]
    step = hl_step_fn(name, batch, shape, graph)
    _common.time_steps(step, 0, WARMUP["graph" if graph else "eager"])
    gc.collect()
    hl.reset_peak_memory_stats()
    times = _common.time_steps(step, steps, 0)
    peak = hl.memory_stats()["peak"]
    stats = None
    if graph:
        from hl import _core
        runner = step.model._graph_runner()
        assert runner.stats()["train_one_batch"]["replayed"] >= steps, "the plan did not replay"
        (entry,) = [e for e in runner.caches["train_one_batch"].entries.values() if e.plan]
        stats = _core.plan_stats(entry.plan.core)
    return peak, statistics.median(times), stats


def measure(name, steps, threads):
    import hl
    hl.set_num_threads(threads)  # hl's own pool (kernel work buffers are sized by it)
    eager_peak, eager_s, _ = _run(name, steps, False)
    gc.collect()
    graph_peak, graph_s, stats = _run(name, steps, True)
    from train import MODELS
    return {"what": MODELS[name][2], "eager_peak": eager_peak, "graph_peak": graph_peak,
            "eager_ms": eager_s * 1e3, "graph_ms": graph_s * 1e3, "stats": stats}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="cnn,resnet18")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--worker")
    args = p.parse_args()
    _common.setup(args.threads)
    if args.worker:
        _common.report(measure(args.worker, args.steps, args.threads))
        return
    print(f"threads {args.threads}, {args.steps} timed steps after warm-up (eager "
          f"{WARMUP['eager']}, graph {WARMUP['graph']}); peak = hl.memory_stats()['peak']")
    for name in args.only.split(","):
        r = _common.run_worker(__file__, ["--threads", args.threads, "--steps", args.steps,
                                          "--worker", name], name)
        s = r["stats"]
        print(f"{r['what']}: peak eager {r['eager_peak'] / 2**20:.1f} MiB, graph "
              f"{r['graph_peak'] / 2**20:.1f} MiB ({r['graph_peak'] / r['eager_peak']:.2f}x); "
              f"step eager {r['eager_ms']:.1f} ms, graph {r['graph_ms']:.1f} ms "
              f"({r['eager_ms'] / r['graph_ms']:.2f}x faster)")
        print(f"  plan: {s['calls']} calls, {s['fused_calls']} fused into {s['fused_groups']} "
              f"passes, {s['in_place']} in place, {s['recomputed']} tensors made again "
              f"(HL_PLAN_NO_RECOMPUTE: none); arena {s['arena_bytes'] / 2**20:.1f} MiB "
              f"(kernel scratch {s['scratch_bytes'] / 2**20:.1f} MiB of blocks in it) for "
              f"{s['planned_tensors']} tensors of {s['planned_bytes'] / 2**20:.1f} MiB; floor "
              f"{s['alive_peak_bytes'] / 2**20:.1f} MiB (the most bytes alive at one call)",
              flush=True)


if __name__ == "__main__":
    main()
