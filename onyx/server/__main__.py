"""`python -m onyx.server`: load a model and serve it (see `onyx.server.serve`)."""

import sys

from onyx.server.serve import main

if __name__ == "__main__":
    sys.exit(main())
