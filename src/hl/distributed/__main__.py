"""python -m hl.distributed -n N script.py: see launch.py."""
import sys

from .launch import main

sys.exit(main())
