"""``python -m paprof`` is the ``paprof`` command."""

import sys

from paprof.entry import main

sys.exit(main())
