"""What every result document shares: its base model (unknown keys refused) and the one
error a document that cannot be read raises."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict


class SchemaError(ValueError):
    """A document that is not (or no longer) readable as its kind; one clear line."""


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


T = TypeVar("T", bound=Doc)
