"""``python -m paprof`` is the ``paprof`` command."""

from paprof.cli import main

main()
