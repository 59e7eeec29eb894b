"""Checkpoints and whole models on disk (see docs/checkpoints.md).

    model.save_states(path, aux_states={"epoch": 3, "optim": opt})   # states archive
    aux = model.load_states(path)
    hl.save(model, path); model = hl.load(path)                      # whole models
    layer.save_weights("w.h5"); layer.load_weights("w.h5")           # plain HDF5

Files: atomic.py (atomic replacement), archive.py (the zip + HDF5 container), matching.py
(pairing a module's tensors with stored values; tensors as datasets), states.py (states
archives), singa.py (SINGA's checkpoint zip), weights.py (HDF5 weight files): these sit below
hl.layers. pickling.py (hl.save / hl.load) and unpickler.py (its allow-list, which names
Layer, Optimizer, Loss and Metric) sit above hl.model (tests/test_imports.py, LAYERS).
"""
