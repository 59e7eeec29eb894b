"""Peak memory and step time of a training step replayed as a libcore plan, beside the same
step run eagerly, in one process (issue 20, item 5). The step is bench/train.py's (forward,
softmax cross-entropy, backward, SGD with momentum); the plan is recorded at the C level
(hl._core.plan_begin/plan_end around one eager step), as graph mode's Python side will.

Peak: hl.memory_stats()['peak'] (bytes handed to tensors, plan arenas included; kernels'
scratch blocks included) over one step after warm-up, hl.reset_peak_memory_stats() first.

    python bench/graph_memory.py [--only cnn,resnet18] [--threads 2] [--steps 5]
"""
import argparse
import gc
import statistics

import _common


def measure(name, steps, threads):
    import hl
    from hl import _core
    from train import MODELS, hl_step_fn
    hl.set_num_threads(threads)  # hl's own pool (kernel work buffers are sized by it)
    batch, shape, what = MODELS[name]
    step = hl_step_fn(name, batch, shape)
    step().detach()  # the first step creates the optimiser's slots
    gc.collect()
    hl.reset_peak_memory_stats()
    times = _common.time_steps(lambda: step().detach(), steps, warmup=1)
    gc.collect()
    eager_peak = hl.memory_stats()["peak"]
    _core.plan_begin()
    try:
        loss = step().detach()
    finally:
        plan = _core.plan_end()
    gc.collect()
    _core.plan_run(plan)  # prepares (fusion) and measures the kernels' scratch
    _core.plan_run(plan)  # plans memory (the arena), then runs
    hl.reset_peak_memory_stats()
    graph_times = _common.time_steps(lambda: _core.plan_run(plan), steps, warmup=1)
    graph_peak = hl.memory_stats()["peak"]
    stats = _core.plan_stats(plan)
    return {"what": what, "eager_peak": eager_peak, "graph_peak": graph_peak,
            "eager_ms": statistics.median(times) * 1e3,
            "graph_ms": statistics.median(graph_times) * 1e3, "stats": stats,
            "loss": loss.item()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="cnn,resnet18")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--worker")
    args = p.parse_args()
    _common.setup(args.threads)
    if args.worker:
        _common.report(measure(args.worker, args.steps, args.threads))
        return
    for name in args.only.split(","):
        r = _common.run_worker(__file__, ["--threads", args.threads, "--steps", args.steps,
                                          "--worker", name], name)
        s = r["stats"]
        print(f"{r['what']}: peak eager {r['eager_peak'] / 2**20:.1f} MiB, graph "
              f"{r['graph_peak'] / 2**20:.1f} MiB ({r['graph_peak'] / r['eager_peak']:.2f}x); "
              f"step eager {r['eager_ms']:.1f} ms, graph {r['graph_ms']:.1f} ms "
              f"({r['eager_ms'] / r['graph_ms']:.2f}x faster)")
        print(f"  plan: {s['calls']} calls, {s['fused_calls']} fused into {s['fused_groups']} "
              f"passes, {s['in_place']} in place; arena {s['arena_bytes'] / 2**20:.1f} MiB for "
              f"{s['planned_tensors']} tensors of {s['planned_bytes'] / 2**20:.1f} MiB (floor: "
              f"{s['alive_peak_bytes'] / 2**20:.1f} MiB alive at once)")


if __name__ == "__main__":
    main()
