"""`python -m server`: load a model and serve it (see `server.serve`)."""

import sys

from server.serve import main

if __name__ == "__main__":
    sys.exit(main())
