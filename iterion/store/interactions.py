"""Interactions (``interactions/<id>.json``): the questions a run asked and the answers it got.

One document per interaction; a question asked again on the same interaction (a review gate's
next turn) appends to ``turns`` so the dialogue is kept.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gitrefs.ids import validate_id
from gitrefs.persist import VersionedModel, write_model
from gitrefs.persist.errors import ErrorKind
from iterion.store.checkpoint import InteractionKind
from iterion.store.errors import StoreError
from iterion.store.fsdocs import read_doc
from iterion.store.ids import new_id
from iterion.store.timeutil import utcnow

INTERACTIONS_DIR = "interactions"


class Turn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    questions: dict[str, Any] = Field(default_factory=dict)
    answers: dict[str, Any] | None = None
    asked_at: datetime = Field(default_factory=utcnow)
    answered_at: datetime | None = None


class InteractionDoc(VersionedModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    node: str
    iteration: int = 0
    kind: InteractionKind = "human"
    turns: list[Turn] = Field(default_factory=list)

    @property
    def pending(self) -> bool:
        return bool(self.turns) and self.turns[-1].answers is None

    @property
    def questions(self) -> dict[str, Any]:
        return self.turns[-1].questions if self.turns else {}

    @property
    def answers(self) -> dict[str, Any] | None:
        return self.turns[-1].answers if self.turns else None


class InteractionNotFoundError(StoreError):
    pass


class InteractionStore:
    def __init__(self, run_dir: Path) -> None:
        self.root = Path(run_dir) / INTERACTIONS_DIR

    def _path(self, interaction_id: str) -> Path:
        return self.root / f"{validate_id(interaction_id, 'interaction id')}.json"

    def ask(self, node: str, questions: dict[str, Any], *, iteration: int = 0, kind: InteractionKind = "human",
            interaction_id: str | None = None) -> InteractionDoc:
        """Record pending questions: a new interaction, or a new turn of ``interaction_id``."""
        if interaction_id and self._path(interaction_id).is_file():
            doc = self.load(interaction_id)
        else:
            doc = InteractionDoc(id=interaction_id or new_id(), node=node, iteration=iteration, kind=kind)
        doc.turns.append(Turn(questions=questions))
        write_model(self._path(doc.id), doc)
        return doc

    def answer(self, interaction_id: str, answers: dict[str, Any]) -> InteractionDoc:
        doc = self.load(interaction_id)
        if not doc.pending:
            raise StoreError(f"interaction {interaction_id} has no pending question to answer", exit_code=ErrorKind.REFUSED)
        doc.turns[-1].answers = answers
        doc.turns[-1].answered_at = utcnow()
        write_model(self._path(doc.id), doc)
        return doc

    def load(self, interaction_id: str) -> InteractionDoc:
        path = self._path(interaction_id)
        if not path.is_file():
            raise InteractionNotFoundError(f"interaction {interaction_id} not found")
        return read_doc(path, InteractionDoc)  # a damaged file: one line naming it, not pydantic's dump

    def list(self) -> list[InteractionDoc]:
        if not self.root.is_dir():
            return []
        return [read_doc(p, InteractionDoc) for p in sorted(self.root.glob("*.json"))]
