"""``python -m numbook.bench``: see :mod:`numbook.bench.cli`."""

from numbook.bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
