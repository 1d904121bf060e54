"""A check offered as a script carries the facts it reads, also when it computes their keys."""

from __future__ import annotations

from pathlib import Path

from numbook.run.standalone import _facts

FACTS = """\
llama_layers: {value: 32, source: "config.json", read: 2026-12-03}
llama_heads: {value: 32, source: "config.json", read: 2026-12-03}
gpt2_layers: {value: 12, source: "config.json", read: 2026-12-03}
"""


def test_a_literal_key_carries_only_that_fact(tmp_path: Path) -> None:
    (tmp_path / "facts.yml").write_text(FACTS, encoding="utf-8")
    assert _facts('L = fact("gpt2_layers", "L")\n', tmp_path) == {"gpt2_layers": 12}


def test_a_computed_key_carries_every_fact(tmp_path: Path) -> None:
    (tmp_path / "facts.yml").write_text(FACTS, encoding="utf-8")
    src = 'for m in ("llama", "gpt2"):\n    L = fact(f"{m}_layers", f"{m}_L")\n'
    assert _facts(src, tmp_path) == {"llama_layers": 32, "llama_heads": 32, "gpt2_layers": 12}
