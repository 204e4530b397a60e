"""Versioned pydantic documents: every persisted format carries ``format_version``.

A reader refuses a document written by a newer format than it understands rather than
silently dropping fields it does not know; older versions load with defaults for new fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from gitrefs.persist.atomic import atomic_write_bytes


class FormatVersionError(ValueError):
    pass


class VersionedModel(BaseModel):
    """Base of every persisted document. Subclasses bump ``FORMAT_VERSION`` on a format change."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    FORMAT_VERSION: ClassVar[int] = 1
    format_version: int = 0

    @model_validator(mode="before")
    @classmethod
    def _stamp_and_check(cls, data: Any) -> Any:
        if isinstance(data, dict):
            seen = data.get("format_version")
            if seen is None:
                data = {**data, "format_version": cls.FORMAT_VERSION}
            elif isinstance(seen, int) and seen > cls.FORMAT_VERSION:
                raise FormatVersionError(
                    f"{cls.__name__} format_version {seen} is newer than this iterion understands "
                    f"({cls.FORMAT_VERSION}); upgrade iterion"
                )
        return data


M = TypeVar("M", bound=BaseModel)


def write_model(path: Path | str, model: BaseModel) -> None:
    atomic_write_bytes(path, model.model_dump_json(indent=2).encode("utf-8") + b"\n")


def read_model(path: Path | str, cls: type[M]) -> M:
    return cls.model_validate_json(Path(path).read_bytes())
