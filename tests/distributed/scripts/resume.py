"""Trains `epochs` epochs with fit (data-parallel on however many ranks run it) from an
optional checkpoint, and saves a checkpoint: a run saved on N ranks resumes on M."""
import hl
from common import MLP, args, digits, params, save

a = args(("start", str, ""), ("epochs", int, 2), ("initial", int, 0))
x, y = digits(n=200)
model = MLP()
model.compile([hl.Placeholder((1, 64))], optimizer=hl.opt.Adam(lr=1e-2), loss="cross_entropy")
if a.start:
    aux = model.load_states(a.start)
    model.optim.set_states(aux["optim"])
cbs = [hl.callbacks.ModelCheckpoint(a.out + ".ck.zip", monitor="loss")]
model.fit(x, y, batch_size=40, epochs=a.epochs, initial_epoch=a.initial, shuffle=True,
          verbose=0, callbacks=cbs, distribute=True)
save(a.out, **params(model))
