"""Allow ``python -m chit``."""

from chit.cli.entry import main

main()
