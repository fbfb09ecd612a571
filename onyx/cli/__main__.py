"""`python -m onyx.cli`: the `onyx` command."""

from onyx.cli import run

if __name__ == "__main__":
    run()
