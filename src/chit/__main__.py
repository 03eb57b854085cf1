"""Allow ``python -m chit``."""

from chit.cli.main import main

main()
