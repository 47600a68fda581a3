"""`python -m dpviz`: see dpviz/cli.py."""
import sys

from .cli import main

sys.exit(main())
