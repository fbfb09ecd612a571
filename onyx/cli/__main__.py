"""`python -m onyx.cli`: the `onyx` command."""

import sys

from onyx.cli import main

if __name__ == "__main__":
    sys.exit(main())
