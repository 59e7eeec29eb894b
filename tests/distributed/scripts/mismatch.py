"""Ranks that disagree: a different model on rank 1, a different hl version, or DistOpt's
gradient_as_bucket_view off on rank 1 only (the bucket layouts would differ)."""
import os

import hl
from common import MLP, args, digits

a = args(("what", str, "model"))
if a.what == "version" and os.environ.get("PMI_RANK") == "1":
    hl._core.version = lambda: "0.0.0-other"  # libcore's version, read when the group is joined
model = MLP(hidden=32 if hl.distributed.rank() == 0 or a.what != "model" else 33)
model.compile(optimizer="sgd", loss="cross_entropy")
x, y = digits(n=64)
if a.what == "views":
    model.optim = hl.opt.DistOpt(hl.opt.SGD(), params=list(model.get_params().values()),
                                 gradient_as_bucket_view=hl.distributed.rank() == 0)
model.fit(x, y, batch_size=16, epochs=1, verbose=0, distribute=True)
