"""hl.v2.optimizer: every v2 update rule against a float64 numpy implementation written here
from v2's formulas (per-parameter learning rate, L2 and L1 decay, momentum, clipping, static
parameters), against torch.optim where the rules coincide, the learning-rate schedules at
hand-computed points, the model average on known sequences, and exact resume from states."""
import contextlib
import math
import warnings

import numpy as np
import pytest

import hl
from hl.v2 import optimizer as v2opt
from hl.v2.lr_schedule import LearningRateSchedule, parse_manual_args

# ---- a float64 reference of v2's rules -------------------------------------------------

SHAPES = {"fc.w": (3, 4), "fc.b": (4,), "emb": (5, 2), "frozen": (2,)}
CONFIGS = {  # the trainer's per-parameter settings (v2's ParamAttr)
    "fc.b": dict(learning_rate=0.5, decay_rate=0.0),
    "emb": dict(learning_rate=2.0, decay_rate=0.05, momentum=0.5,
                gradient_clipping_threshold=0.8),
    "frozen": dict(is_static=True),
}
L2, CLIP, LR0, POLY_A, POLY_B = 0.02, 1.5, 0.05, 0.01, 0.5
BATCH_SIZES = [8, 16, 8, 32, 8, 8]
# (config class, its own keywords, reference name, follows the schedule)
METHODS = [
    (v2opt.Momentum, dict(momentum=0.9), "momentum", True),
    (v2opt.AdaGrad, {}, "adagrad", False),
    (v2opt.DecayedAdaGrad, dict(rho=0.9, epsilon=1e-4), "decayed_adagrad", True),
    (v2opt.RMSProp, dict(rho=0.9, epsilon=1e-4), "rmsprop", True),
    (v2opt.AdaDelta, dict(rho=0.9, epsilon=1e-4), "adadelta", True),
    (v2opt.Adam, dict(beta1=0.8, beta2=0.95, epsilon=1e-6), "adam", False),
    (v2opt.Adamax, dict(beta1=0.8, beta2=0.9), "adamax", False),
]
IDS = [m[2] for m in METHODS]


def poly(n):
    return LR0 * (1.0 + POLY_A * n) ** (-POLY_B)


def reference(method, kw, values, grads, batch_sizes, configs, lr_of_n, decay=0.0,
              momentum=0.0, clip=0.0):
    """v2's updates in float64, written from the formulas of its C++ update functions."""
    w = {k: v.astype(np.float64) for k, v in values.items()}
    state = {k: {} for k in values}
    n = 0
    for t, (gs, bs) in enumerate(zip(grads, batch_sizes), start=1):
        n += bs
        glr = lr_of_n(n)
        for k in w:
            cfg = configs.get(k, {})
            if cfg.get("is_static"):
                continue
            g = gs[k].astype(np.float64)
            threshold = cfg.get("gradient_clipping_threshold") or clip
            if threshold:
                g = np.clip(g, -threshold, threshold)
            lr = glr * cfg.get("learning_rate", 1.0)
            l2 = cfg["decay_rate"] if cfg.get("decay_rate") is not None else decay
            l1 = cfg.get("decay_rate_l1", 0.0)
            mu = cfg.get("momentum", momentum)
            s, z = state[k], np.zeros_like(g)
            if method == "adam":
                b1, b2 = kw["beta1"], kw["beta2"]
                s["m"] = b1 * s.get("m", z) + (1 - b1) * g
                s["v"] = b2 * s.get("v", z) + (1 - b2) * g * g
                alpha = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
                w[k] = w[k] - alpha * s["m"] / (np.sqrt(s["v"]) + kw["epsilon"])
                continue
            if method == "adamax":
                b1, b2 = kw["beta1"], kw["beta2"]
                s["m"] = b1 * s.get("m", z) + (1 - b1) * g
                s["u"] = np.maximum(b2 * s.get("u", z), np.abs(g))
                w[k] = w[k] - lr / (1 - b1 ** t) * s["m"] / s["u"]
                continue
            rho, eps = kw.get("rho"), kw.get("epsilon", 1e-6)
            if method == "momentum":
                r = 1.0
            elif method == "adagrad":
                s["sum"] = s.get("sum", z) + g * g
                r = 1 / np.sqrt(s["sum"] + eps)
            elif method in ("decayed_adagrad", "rmsprop"):
                s["ms"] = rho * s.get("ms", z) + (1.0 if t == 1 else 1 - rho) * g * g
                if method == "rmsprop":
                    s["mg"] = rho * s.get("mg", z) + (1 - rho) * g
                    r = 1 / np.sqrt(s["ms"] - s["mg"] ** 2 + eps)
                else:
                    r = 1 / np.sqrt(s["ms"] + eps)
            elif method == "adadelta":
                s["ms"] = rho * s.get("ms", z) + (1 - rho) * g * g
                r = np.sqrt((s.get("u", z) + eps) / (s["ms"] + eps))
                s["u"] = rho * s.get("u", z) + (1 - rho) * (g * r) ** 2
            inner_decay = 0.0 if l1 else l2
            s["mom"] = mu * s.get("mom", z) - lr * r * (g + inner_decay * w[k])
            w[k] = w[k] + s["mom"]
            if l1:  # v2's regulariser after the update
                lam = lr * l1 * r
                w[k] = np.sign(w[k]) * np.maximum(np.abs(w[k]) - lam, 0.0)
                w[k] = w[k] / (1 + lr * l2 * r)
    return w


# ---- helpers --------------------------------------------------------------------------

def make_params(values):
    return {k: hl.Tensor(v.copy(), requires_grad=True, stores_grad=True, name=k)
            for k, v in values.items()}


def random_problem(rng, steps=len(BATCH_SIZES), shapes=SHAPES):
    values = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    grads = [{k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
             for _ in range(steps)]
    return values, grads


def train(opt, params, grads, batch_sizes):
    for gs, bs in zip(grads, batch_sizes):
        opt.start_batch(bs)
        for k, p in params.items():
            opt.update(p, hl.tensor(gs[k]))
        opt.finish_batch()


def build(cls, kw, follows, configs=CONFIGS, average=None, warn_l2=None, **settings):
    settings.setdefault("learning_rate", LR0)
    if follows:
        settings.update(learning_rate_schedule="poly", learning_rate_decay_a=POLY_A,
                        learning_rate_decay_b=POLY_B)
    warn = pytest.warns(UserWarning, match="ignores L2") if warn_l2 else \
        contextlib.nullcontext()
    with warn:
        return cls(**kw, model_average=average, **settings).build(configs)


# ---- the rules --------------------------------------------------------------------------

@pytest.mark.parametrize("cls,kw,method,follows", METHODS, ids=IDS)
def test_rule_matches_float64_reference(rng, cls, kw, method, follows):
    """Several batches of different sizes: per-parameter learning_rate, decay_rate (own,
    global, explicit 0), momentum, clipping threshold (own and global), a static parameter."""
    values, grads = random_problem(rng)
    params = make_params(values)
    ignores_l2 = method in ("adam", "adamax")
    opt = build(cls, kw, follows, regularization=v2opt.L2Regularization(L2),
                gradient_clipping_threshold=CLIP, warn_l2=ignores_l2)
    train(opt, params, grads, BATCH_SIZES)
    # the reference's Adam and Adamax ignore decay and momentum, as v2's did
    expected = reference(method, kw, values, grads, BATCH_SIZES, CONFIGS,
                         poly if follows else (lambda n: LR0), decay=L2,
                         momentum=kw.get("momentum", 0.0), clip=CLIP)
    for k, p in params.items():
        np.testing.assert_allclose(p.numpy(), expected[k], rtol=1e-4, atol=1e-5, err_msg=k)
    np.testing.assert_array_equal(params["frozen"].numpy(), values["frozen"])  # static
    assert not np.allclose(params["fc.w"].numpy(), values["fc.w"])
    assert opt.step_count == len(BATCH_SIZES) and opt.num_samples == sum(BATCH_SIZES)


@pytest.mark.parametrize("cls,kw,method,follows",
                         [m for m in METHODS if m[2] in ("momentum", "adagrad", "rmsprop")],
                         ids=["momentum", "adagrad", "rmsprop"])
def test_l1_rate_moves_decay_after_the_rule(rng, cls, kw, method, follows):
    """decay_rate_l1 > 0: v2 shrinks after the update (soft threshold, then the L2 factor),
    scaled by the rule's per-element rate where it has one; momentum must be 0."""
    shapes = {"w": (4, 3)}
    values, grads = random_problem(rng, 4, shapes)
    configs = {"w": dict(decay_rate=0.3, decay_rate_l1=0.2, momentum=0.0)}
    params = make_params(values)
    opt = build(cls, kw, follows, configs=configs)
    train(opt, params, grads, [4] * 4)
    expected = reference(method, kw, values, grads, [4] * 4, configs,
                         poly if follows else (lambda n: LR0))
    np.testing.assert_allclose(params["w"].numpy(), expected["w"], rtol=1e-4, atol=1e-6)
    with pytest.raises(hl.errors.ValueError, match="L1 rate with momentum"):
        v2opt.Momentum(momentum=0.9).build({"w": dict(decay_rate_l1=0.1)})


def test_momentum_zero_constant_lr_is_plain_sgd(rng):
    values, grads = random_problem(rng, 5, {"w": (6,)})
    params = make_params(values)
    opt = v2opt.Momentum(momentum=0, learning_rate=0.1,
                         learning_rate_schedule="constant").build({})
    train(opt, params, grads, [3] * 5)
    w = values["w"].astype(np.float64)
    for gs in grads:
        w = w - 0.1 * gs["w"]
    np.testing.assert_allclose(params["w"].numpy(), w, rtol=1e-5, atol=1e-6)
    assert "w:momentum" not in opt.get_states()  # no buffer without momentum


def test_gradient_clipping_is_element_wise_before_decay():
    w = hl.Tensor(np.array([1.0, -1.0, 2.0, 0.0], np.float32), name="w")
    b = hl.Tensor(np.array([0.0, 0.0], np.float32), name="b")
    opt = v2opt.Momentum(learning_rate=1.0, gradient_clipping_threshold=0.5,
                         regularization=v2opt.L2Regularization(0.1)).build(
        {"b": dict(gradient_clipping_threshold=2.0)})
    opt.start_batch(1)
    opt.update(w, hl.tensor(np.array([2.0, -3.0, 0.1, -0.4], np.float32)))
    opt.update(b, hl.tensor(np.array([3.0, -1.0], np.float32)))
    opt.finish_batch()
    # w -= clip(g, 0.5) + 0.1 * w;  b (own threshold 2) -= clip(g, 2) + 0.1 * 0
    np.testing.assert_allclose(w.numpy(), [1 - 0.5 - 0.1, -1 + 0.5 + 0.1, 2 - 0.1 - 0.2,
                                           0.4], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [-2.0, 1.0], rtol=1e-6)


def test_adam_and_adamax_ignore_l2_and_schedule_adagrad_ignores_schedule(rng):
    values, grads = random_problem(rng, 4, {"w": (5,)})
    finals = []
    for settings in [{}, dict(regularization=v2opt.L2Regularization(0.5),
                              learning_rate_schedule="exp", learning_rate_decay_a=0.5,
                              learning_rate_decay_b=2.0)]:
        params = make_params(values)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            opt = v2opt.Adam(learning_rate=0.01, **settings).build({})
        messages = " ".join(str(r.message) for r in record)
        assert (("ignores L2" in messages and "ignores learning_rate_schedule" in messages)
                == bool(settings)), messages
        train(opt, params, grads, [10] * 4)
        assert opt.lr == 0.01
        finals.append(params["w"].numpy())
    np.testing.assert_array_equal(finals[0], finals[1])
    with pytest.warns(UserWarning, match="ignores learning_rate_schedule"):
        opt = v2opt.AdaGrad(learning_rate=0.01, learning_rate_decay_a=1.0,
                            learning_rate_decay_b=1.0).build({})
    opt.start_batch(100)
    assert opt.lr == 0.01
    with pytest.warns(UserWarning, match="ignores L2"):
        v2opt.Adamax().build({"w": dict(decay_rate=0.1)})


def test_adamax_element_with_zero_gradients_stays_finite():
    w = hl.Tensor(np.array([1.0, 2.0], np.float32), name="w")
    opt = v2opt.Adamax(learning_rate=0.1).build({})
    for _ in range(3):
        opt.start_batch(2)
        opt.update(w, hl.tensor(np.array([0.0, 1.0], np.float32)))
        opt.finish_batch()
    assert w.numpy()[0] == 1.0 and np.isfinite(w.numpy()).all() and w.numpy()[1] < 2.0


def test_backward_and_update_is_the_same_batch(rng):
    """start_batch + backward_and_update (v2's sum-of-costs gradient) = the manual path."""
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal((8,)).astype(np.float32)
    w0 = rng.standard_normal(3).astype(np.float32)
    cfg = v2opt.Momentum(momentum=0.9, learning_rate=0.01, learning_rate_decay_a=0.1,
                         learning_rate_decay_b=0.5,
                         regularization=v2opt.L2Regularization(0.01))
    w = hl.Tensor(w0.copy(), requires_grad=True, stores_grad=True, name="w")
    opt = cfg.build({})
    hx, hy = hl.tensor(x), hl.tensor(y)
    for _ in range(3):
        opt.start_batch(8)
        opt.backward_and_update(((hx @ w - hy) ** 2).sum())
    w2 = w0.astype(np.float64)
    mom, n = np.zeros(3), 0
    for _ in range(3):
        n += 8
        lr = 0.01 * (1 + 0.1 * n) ** -0.5
        g = 2 * x.T.astype(np.float64) @ (x @ w2 - y)
        mom = 0.9 * mom - lr * (g + 0.01 * w2)
        w2 = w2 + mom
    np.testing.assert_allclose(w.numpy(), w2, rtol=1e-4, atol=1e-6)
    assert opt.step_count == 3


# ---- against torch.optim where the rules coincide -----------------------------------------

def _torch_run(torch, topt_cls, values, grads, **kw):
    tp = torch.tensor(values.astype(np.float64), requires_grad=True)
    topt = topt_cls([tp], **kw)
    for g in grads:
        tp.grad = torch.tensor(g.astype(np.float64))
        topt.step()
    return tp.detach().numpy()


# (v2 config, torch optimiser name, torch keywords): equal at a constant learning rate
TORCH_CASES = [
    # mom = mu mom - lr (g + wd w) is -lr times torch's buffer b = mu b + (g + wd w)
    (lambda: v2opt.Momentum(momentum=0.9, learning_rate=0.05,
                            regularization=v2opt.L2Regularization(0.01)),
     "SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    # eps = 0: v2's lr sqrt(1 - b2^t) / (1 - b1^t) m / sqrt(v) is torch's bias correction
    (lambda: v2opt.Adam(beta1=0.8, beta2=0.9, epsilon=0.0, learning_rate=0.01),
     "Adam", dict(lr=0.01, betas=(0.8, 0.9), eps=0.0)),
    (lambda: v2opt.Adamax(beta1=0.8, beta2=0.9, learning_rate=0.01),
     "Adamax", dict(lr=0.01, betas=(0.8, 0.9), eps=0.0)),
    (lambda: v2opt.AdaDelta(rho=0.9, epsilon=1e-3, learning_rate=0.5),
     "Adadelta", dict(lr=0.5, rho=0.9, eps=1e-3)),
    # v2 puts its epsilon (1e-6) inside the square root, torch outside: with |g| >= 0.5 the
    # difference is below 2e-6 relative
    (lambda: v2opt.AdaGrad(learning_rate=0.1), "Adagrad", dict(lr=0.1, eps=0.0)),
]


@pytest.mark.parametrize("make,torch_name,tkw", TORCH_CASES,
                         ids=[c[1] for c in TORCH_CASES])
def test_matches_torch_where_rules_coincide(rng, make, torch_name, tkw):
    torch = pytest.importorskip("torch")
    shape = (4, 3)
    w0 = rng.standard_normal(shape).astype(np.float32)
    grads = [(np.sign(rng.standard_normal(shape)) * rng.uniform(0.5, 2.0, shape))
             .astype(np.float32) for _ in range(8)]
    w = hl.Tensor(w0.copy(), name="w")
    opt = make().build({})
    for g in grads:
        opt.start_batch(16)
        opt.update(w, hl.tensor(g))
        opt.finish_batch()
    expected = _torch_run(torch, getattr(torch.optim, torch_name), w0, grads, **tkw)
    np.testing.assert_allclose(w.numpy(), expected, rtol=2e-5, atol=2e-6)


# ---- learning-rate schedules ----------------------------------------------------------------

# (schedule, a, b, args, [(n, pass, expected)]); lr = 0.1, values computed by hand
SCHEDULE_CASES = [
    ("constant", 0.0, 0.0, "", [(0, 0, 0.1), (12345, 3, 0.1)]),
    ("poly", 0.01, 0.5, "", [(0, 0, 0.1), (300, 0, 0.1 / 2), (800, 0, 0.1 / 3)]),
    ("poly", 0.0, 0.0, "", [(10 ** 6, 0, 0.1)]),  # v2's default: constant
    ("caffe_poly", 1000.0, 2.0, "", [(0, 0, 0.1), (500, 0, 0.025), (1000, 0, 0.0),
                                     (1500, 0, 0.0)]),
    ("exp", 0.5, 100.0, "", [(0, 0, 0.1), (100, 0, 0.05), (250, 0, 0.1 * 0.5 ** 2.5)]),
    ("discexp", 0.5, 100.0, "", [(99, 0, 0.1), (100, 0, 0.05), (250, 0, 0.025)]),
    ("linear", 1e-4, 0.02, "", [(0, 0, 0.1), (500, 0, 0.05), (700, 0, 0.03),
                                (1000, 0, 0.02), (5000, 0, 0.02)]),
    ("manual", 0.0, 0.0, "1000:1.0,2000:0.5,3000:0.1",
     [(1, 0, 0.1), (1000, 0, 0.1), (1001, 0, 0.05), (2000, 0, 0.05), (2500, 0, 0.01),
      (5000, 0, 0.01)]),
    ("pass_manual", 0.0, 0.0, "1:1.0, 3:0.5, 5:0.25",
     [(0, 0, 0.1), (999, 1, 0.1), (0, 2, 0.05), (0, 3, 0.05), (0, 4, 0.025),
      (0, 9, 0.025)]),
]


@pytest.mark.parametrize("name,a,b,args,points", SCHEDULE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(SCHEDULE_CASES)])
def test_schedule_values(name, a, b, args, points):
    sched = LearningRateSchedule(0.1, name, a, b, args)
    for n, pass_id, expected in points:
        assert sched(n, pass_id) == pytest.approx(expected, rel=1e-12, abs=1e-15), (n, pass_id)


def test_sample_count_includes_the_current_batch():
    opt = v2opt.Momentum(learning_rate=0.1, learning_rate_schedule="discexp",
                         learning_rate_decay_a=0.5, learning_rate_decay_b=100).build({})
    assert opt.lr == 0.1  # before the first batch: learning_rate
    opt.start_batch(100)  # n = 100 already in this batch
    assert opt.lr == pytest.approx(0.05)
    opt.finish_batch()
    opt.start_batch(99)
    assert opt.lr == pytest.approx(0.05) and opt.num_samples == 199
    opt.finish_batch()
    opt.start_batch(1)
    assert opt.lr == pytest.approx(0.025)


def test_default_schedule_is_v2s_poly():
    opt = v2opt.Momentum(learning_rate=0.1, learning_rate_decay_a=0.01,
                         learning_rate_decay_b=0.5).build({})
    opt.start_batch(300)
    assert opt.lr == pytest.approx(0.05)


def test_pass_manual_follows_passes():
    opt = v2opt.Momentum(learning_rate=1.0, learning_rate_schedule="pass_manual",
                         learning_rate_args="0:1.0,1:0.5,2:0.25").build({})
    seen = []
    for pass_id in range(4):
        opt.start_pass(pass_id)
        opt.start_batch(10)
        seen.append(opt.lr)
        opt.finish_batch()
        opt.finish_pass()
    assert seen == [1.0, 0.5, 0.25, 0.25]
    assert opt.pass_id == 4


def test_manual_args_parsing():
    assert parse_manual_args("1000:1.0,2000:0.5") == ([1000, 2000], [1.0, 0.5])
    assert parse_manual_args(" 5:1 , 7:0.1 ") == ([5, 7], [1.0, 0.1])
    for bad, match in [("", "need learning_rate_args"), ("1000", "<integer>:<rate>"),
                       ("a:1.0", "<integer>:<rate>"), ("1000:x", "<integer>:<rate>"),
                       ("1000:1.0,", "<integer>:<rate>"), ("2000:1.0,1000:0.5", "increase"),
                       ("10:-1", ">= 0")]:
        with pytest.raises(hl.errors.ValueError, match=match):
            v2opt.Momentum(learning_rate_schedule="manual", learning_rate_args=bad)


@pytest.mark.parametrize("settings,match", [
    (dict(learning_rate_schedule="cosine"), "unknown learning_rate_schedule"),
    (dict(learning_rate_schedule="exp", learning_rate_decay_a=0.5), "decay_b"),
    (dict(learning_rate_schedule="discexp"), "decay_b"),
    (dict(learning_rate_schedule="caffe_poly"), "decay_a"),
    (dict(learning_rate=-1.0), "learning_rate"),
    (dict(learning_rate="0.1"), "learning_rate"),
    (dict(regularization=0.1), "L2Regularization"),
    (dict(model_average=0.5), "ModelAverage"),
    (dict(gradient_clipping_threshold=-1), "gradient_clipping_threshold"),
])
def test_bad_settings(settings, match):
    with pytest.raises(hl.errors.ValueError, match=match):
        v2opt.Momentum(**settings)


def test_keywords():
    with pytest.raises(hl.errors.ValueError, match=r"Adam: unknown keyword \['lr'\]; Adam "
                                                  r"accepts beta1, beta2, epsilon, learning_rate"):
        v2opt.Adam(lr=0.1)
    with pytest.raises(hl.errors.UnsupportedError, match="parameter server"):
        v2opt.AdaGrad(is_async=True)
    for bad in [dict(beta1=1.0), dict(beta2=-0.1), dict(epsilon=-1)]:
        with pytest.raises(hl.errors.ValueError):
            v2opt.Adam(**bad)
    with pytest.raises(hl.errors.ValueError, match="rho"):
        v2opt.RMSProp(rho=1.5)
    with pytest.raises(hl.errors.ValueError, match="momentum"):
        v2opt.Momentum(momentum=float("nan"))
    with pytest.raises(hl.errors.ValueError, match="max_average_window"):
        v2opt.ModelAverage(0.5, max_average_window=0)
    with pytest.raises(hl.errors.ValueError, match="'emb'.*learning_rate"):
        v2opt.Momentum().build({"emb": dict(learning_rate=-2)})
    v2opt.Momentum(batch_size=128, async_lagged_grad_discard_ratio=2.0)  # v2 took them


def test_lr_assignment_replaces_the_schedule():
    opt = v2opt.Momentum(learning_rate=0.1, learning_rate_decay_a=1.0,
                         learning_rate_decay_b=1.0).build({})
    opt.start_batch(9)
    assert opt.lr == pytest.approx(0.01)
    opt.finish_batch()
    opt.lr = 0.5  # what hl's lr callbacks do
    opt.start_batch(100)
    assert opt.lr == 0.5
    with pytest.raises(hl.errors.ValueError, match="number"):
        opt.lr = [0.1]


def test_update_without_start_batch_warns_for_sample_schedules():
    w = hl.Tensor(np.ones(2, np.float32), name="w")
    opt = v2opt.Momentum(learning_rate=0.1, learning_rate_decay_a=1.0,
                         learning_rate_decay_b=1.0).build({})
    with pytest.warns(UserWarning, match="0 samples"):
        opt.update(w, hl.tensor(np.ones(2, np.float32)))
    opt.step()
    assert opt.step_count == 1 and opt.num_samples == 0
    opt.start_batch(1)
    with pytest.raises(hl.errors.ValueError, match="still open"):
        opt.start_batch(1)


# ---- model average ------------------------------------------------------------------------

def _counting_run(average, batches_per_pass, passes, check, extra=None):
    """w goes 1, 2, 3, ... (w += 1 per batch); check(batch number, opt, w) after each."""
    w = hl.Tensor(np.zeros(3, np.float32), name="w")
    opt = v2opt.Momentum(learning_rate=1.0, model_average=average).build({})
    k = 0
    for _ in range(passes):
        opt.start_pass()
        for _ in range(batches_per_pass):
            k += 1
            opt.start_batch(4)
            opt.update(w, hl.tensor(-np.ones(3, np.float32)))
            opt.finish_batch()
            check(k, opt, w)
        opt.finish_pass()
    return opt, w


def test_model_average_fixed_window():
    """average_window 0.5, max_average_window 3: the window restarts once 3 batches are in
    it, and the average covers the old window and the current one."""
    expected = {1: 1.0, 2: 1.5, 3: 2.0, 4: 2.5, 5: 3.0, 6: 5.0, 7: 5.5, 9: 8.0}
    seen = {}

    def check(k, opt, w):
        with opt.averaged():
            seen[k] = float(w.numpy()[0])
            np.testing.assert_array_equal(w.numpy(), w.numpy()[0])
        assert float(w.numpy()[0]) == k  # the training value is back

    _counting_run(v2opt.ModelAverage(0.5, max_average_window=3), 9, 1, check)
    for k, v in expected.items():
        assert seen[k] == pytest.approx(v), k


def test_model_average_window_follows_passes():
    """Without max_average_window: min 10000 until the first pass ends, then the window is
    bounded by the batches of the last pass (4 here) and the batches so far."""
    expected = {4: 2.5, 5: 3.0, 6: 3.5, 8: 4.5, 9: 7.5, 10: 8.0}
    seen = {}

    def check(k, opt, w):
        with opt.averaged():
            seen[k] = float(w.numpy()[0])

    _counting_run(v2opt.ModelAverage(1.0), 4, 3, check)
    for k, v in expected.items():
        assert seen[k] == pytest.approx(v), k


@pytest.mark.parametrize("register", [False, True], ids=["first-seen-late", "registered"])
def test_model_average_of_a_parameter_updated_late(register):
    """b gets its first gradient in batch 3: it held 10 through batches 1 and 2."""
    a = hl.Tensor(np.zeros(2, np.float32), name="a")
    b = hl.Tensor(np.full(2, 10.0, np.float32), name="b")
    frozen = hl.Tensor(np.full(2, 5.0, np.float32), name="frozen")
    opt = v2opt.Momentum(learning_rate=1.0, model_average=v2opt.ModelAverage(
        0.5, max_average_window=100)).build(
        {"frozen": dict(is_static=True)},
        params={"a": a, "b": b, "frozen": frozen} if register else None)
    for k in range(4):
        opt.start_batch(2)
        opt.update(a, hl.tensor(-np.ones(2, np.float32)))
        opt.update(frozen, hl.tensor(-np.ones(2, np.float32)))
        if k >= 2:
            opt.update(b, hl.tensor(-np.ones(2, np.float32)))
        opt.finish_batch()
    with opt.averaged():
        np.testing.assert_allclose(a.numpy(), 2.5)
        np.testing.assert_allclose(b.numpy(), (10 + 10 + 11 + 12) / 4)
        np.testing.assert_array_equal(frozen.numpy(), 5.0)
        with pytest.raises(hl.errors.ValueError, match="restore"):
            opt.update(a, hl.tensor(np.ones(2, np.float32)))
    np.testing.assert_array_equal(b.numpy(), 12.0)
    opt.apply_average([a])  # only the parameters given
    np.testing.assert_allclose(a.numpy(), 2.5)
    np.testing.assert_array_equal(b.numpy(), 12.0)
    opt.restore()
    np.testing.assert_array_equal(a.numpy(), 4.0)


def test_without_model_average_averaged_is_a_no_op():
    w = hl.Tensor(np.ones(3, np.float32), name="w")
    opt = v2opt.Adam().build({})
    opt.start_batch(1)
    opt.update(w, hl.tensor(np.ones(3, np.float32)))
    opt.finish_batch()
    before = w.numpy().copy()
    with opt.averaged():
        np.testing.assert_array_equal(w.numpy(), before)
    assert v2opt.ModelAverage(0).window() is None  # v2: average_window 0 is off


# ---- states -------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,kw,method,follows", METHODS, ids=IDS)
@pytest.mark.parametrize("as_numpy", [False, True], ids=["tensors", "numpy"])
def test_resume_from_states_is_exact(rng, cls, kw, method, follows, as_numpy):
    steps, first = 7, 4
    values, grads = random_problem(rng, steps)
    sizes = [5, 7, 3, 9, 4, 6, 8]
    average = v2opt.ModelAverage(0.5, max_average_window=2)

    def make():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return build(cls, kw, follows, average=average,
                         regularization=v2opt.L2Regularization(L2))

    params = make_params(values)
    opt = make()
    opt.start_pass()
    train(opt, params, grads[:first], sizes[:first])
    opt.finish_pass()
    states = opt.get_states()
    saved = {k: p.numpy().copy() for k, p in params.items()}
    train(opt, params, grads[first:], sizes[first:])
    if as_numpy:
        states = {k: (np.array(v.numpy()) if isinstance(v, hl.Tensor) else v)
                  for k, v in states.items()}
    params2 = make_params(saved)
    opt2 = make()
    opt2.set_states(states)
    assert (opt2.num_samples, opt2.pass_id, opt2.step_count) == (sum(sizes[:first]), 1, first)
    train(opt2, params2, grads[first:], sizes[first:])
    for k in params:
        np.testing.assert_array_equal(params[k].numpy(), params2[k].numpy(), err_msg=k)
    with opt.averaged(), opt2.averaged():
        for k in params:
            np.testing.assert_array_equal(params[k].numpy(), params2[k].numpy(), err_msg=k)
    assert opt2.lr == opt.lr


def test_set_states_rejects_foreign_states():
    opt = v2opt.Momentum(momentum=0.9).build({})
    plain = hl.opt.SGD(lr=0.1).get_states()
    with pytest.raises(hl.errors.ValueError, match="lack"):
        opt.set_states(plain)
    adam = v2opt.Adam().build({})
    w = hl.Tensor(np.ones(2, np.float32), name="w")
    adam.start_batch(1)
    adam.update(w, hl.tensor(np.ones(2, np.float32)))
    adam.finish_batch()
    with pytest.raises(hl.errors.ValueError, match="unexpected entries"):
        opt.set_states(adam.get_states())
