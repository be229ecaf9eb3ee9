"""``python -m verif.cli``: the same as ``tpu-rtl``."""

import sys

from verif.cli import main

sys.exit(main())
