"""Ranks that disagree: a different model on rank 1, or a different hl version."""
import os

import hl
from common import MLP, args, digits

a = args(("what", str, "model"))
if a.what == "version" and os.environ.get("PMI_RANK") == "1":
    hl._core.version = lambda: "0.0.0-other"  # libcore's version, read when the group is joined
model = MLP(hidden=32 if hl.distributed.rank() == 0 or a.what != "model" else 33)
model.compile(optimizer="sgd", loss="cross_entropy")
x, y = digits(n=64)
model.fit(x, y, batch_size=16, epochs=1, verbose=0, distribute=True)
