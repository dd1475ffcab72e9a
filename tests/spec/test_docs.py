"""pocs/SPEC.md is generated from the models; this fails when it is stale."""

from __future__ import annotations

from pocforge.spec.docs import spec_markdown
from pocforge.spec.schema import PocSpec


def test_spec_md_is_in_sync(repo):
    on_disk = (repo / "pocs" / "SPEC.md").read_text()
    assert on_disk == spec_markdown(), "pocs/SPEC.md is stale: run `make spec-docs`"


def test_every_field_is_documented():
    missing = []
    queue = [PocSpec]
    seen = set()
    while queue:
        model = queue.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            if not field.description:
                missing.append(f"{model.__name__}.{name}")
            from pocforge.spec.docs import _models

            queue.extend(_models(field.annotation))
    assert not missing, f"fields without a description: {missing}"
