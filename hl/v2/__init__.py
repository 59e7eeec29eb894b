"""hl.v2: PaddlePaddle's v2 API (2017) on hl, so ``import hl.v2 as paddle`` runs old trainer
scripts unchanged. Being built; see docs/v2.md."""
