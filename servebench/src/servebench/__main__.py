"""``python -m servebench``: see :mod:`servebench.cli`."""

from servebench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
