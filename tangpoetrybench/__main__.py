"""`python -m tangpoetrybench`: the `tpb` command line."""

import sys

from .cli import main

sys.exit(main())
