"""rank / world_size / local_rank / is_main / barrier, and the launcher's thread count."""
import json
import os

import hl
from common import args

a = args()
hl.distributed.barrier()
info = {"rank": hl.distributed.rank(), "world_size": hl.distributed.world_size(),
        "local_rank": hl.distributed.local_rank(), "is_main": hl.distributed.is_main(),
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "devices": hl.distribution.list_devices()}
hl.distributed.barrier()
with open(f"{a.out}.rank{info['rank']}.json", "w") as f:
    json.dump(info, f)
