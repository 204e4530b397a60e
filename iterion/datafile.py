"""Reading a JSON or YAML file that must hold one object (answers files, script files).

One reader so every surface words the three failures (missing, unparsable, not an object)
the same way; each caller wraps ``DataFileError`` into its own error type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class DataFileError(ValueError):
    pass


def read_mapping(path: Path, what: str, *, shape: str = "must hold a JSON object") -> dict[str, Any]:
    """Parse ``path`` (YAML is a superset of JSON) and return its top-level mapping."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFileError(f"{what} {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise DataFileError(f"{what} {path} is not valid JSON/YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DataFileError(f"{what} {path} {shape}")
    return data
