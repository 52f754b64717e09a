"""`python3 -m speclab.conformance`: the command line of speclab.conformance.main."""

import sys

from . import main

sys.exit(main())
