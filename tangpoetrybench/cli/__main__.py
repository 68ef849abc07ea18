"""`python -m tangpoetrybench.cli`: the `tpb` command line."""

import sys

from . import main

sys.exit(main())
