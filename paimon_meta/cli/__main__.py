"""``python -m paimon_meta.cli``: the ``paimon-meta`` command."""

import sys

from paimon_meta.cli.main import main

sys.exit(main())
