"""``python -m iterion``: the same program as the ``iterion`` console script.

The one module of ``iterion/`` allowed to import ``cli/`` (tests/architecture/test_layers.py
``ENTRY_SHIMS``): ``python -m`` names a package, and the package users know is ``iterion``; the
program itself lives in the CLI layer above, so this shim only hands over to it.
"""

from cli.main import main

if __name__ == "__main__":
    main()
