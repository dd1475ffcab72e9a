"""Spec verbs: ls, new, validate, show, schema (filled in by the foundation work)."""


def register(main) -> None:  # noqa: ARG001
    return None
