"""`python -m tinynas.cli`: the same as the `tinynas` command."""

import sys

from tinynas.cli import main

sys.exit(main())
