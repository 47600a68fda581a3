"""`python -m dpviz`: see dpviz/cli.py."""
import sys

from .cli import main

if __name__ == "__main__":  # a rank process started by multiprocessing imports this too
    sys.exit(main())
