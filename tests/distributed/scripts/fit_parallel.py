"""fit with hl.distribution.DataParallel (or distribute=True): shuffled, a validation split,
metrics, a short last batch, and the callbacks that write files; alone, the same script is
the single-process reference."""
import json


import hl
from common import MLP, args, digits, params, save

a = args(("n", int, 303), ("batch", int, 60), ("epochs", int, 3), ("way", str, "keras"))
r = hl.distributed.rank()  # in the file names: only rank 0 may write them
hl.manual_seed(3)
x, y = digits(n=a.n)
model = MLP()
model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9), loss="cross_entropy",
              metrics=["accuracy"])
cbs = [hl.callbacks.CSVLogger(f"{a.out}.r{r}.csv"),
       hl.callbacks.ModelCheckpoint(f"{a.out}.r{r}.ck{{epoch}}.zip", monitor="val_loss"),
       hl.callbacks.EarlyStopping(monitor="val_loss", patience=1)]
kw = {}
if a.way == "keras":
    hl.distribution.set_distribution(hl.distribution.DataParallel())
else:
    kw["distribute"] = True
history = model.fit(x, y, batch_size=a.batch, epochs=a.epochs, validation_split=0.2,
                    callbacks=cbs, verbose=2, **kw)
ev = model.evaluate(x, y, batch_size=a.batch, return_dict=True, verbose=0, **kw)
pred = model.predict(x[:37], batch_size=8, verbose=0, **kw)
save(a.out, pred=pred, **params(model))
with open(f"{a.out}.rank{hl.distributed.rank()}.json", "w") as f:
    json.dump({"history": history.history, "evaluate": ev,
               "optim": type(model.optim).__name__}, f)
