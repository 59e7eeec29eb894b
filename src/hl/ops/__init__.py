"""hl.ops: every tensor operation, one module per op family. Tensor methods and operators
call into these; the autograd layer wraps them with gradients."""
from .creation import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .random import manual_seed, rand, randn, uniform, normal, bernoulli  # noqa: F401
from .reduce import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pool import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .softmax import *  # noqa: F401,F403
from .index import *  # noqa: F401,F403
from .resize import *  # noqa: F401,F403
