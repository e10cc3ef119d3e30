"""`python -m rzmq`: the rzmq command; without arguments it runs `rzmq doctor`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["doctor"]))
