"""Load the model's tokenizer from a local path, lightly.

``tokenizer.json`` is read with ``tokenizers`` (fast to import); only folders without one
fall back to ``transformers.AutoTokenizer`` (local files only, never the hub).
"""

from __future__ import annotations

from pathlib import Path


class TokenizerError(ValueError):
    """The tokenizer could not be loaded."""


class Tokenizer:
    """encode/decode without special tokens, plus the ids a random prompt may use."""

    def __init__(self, path: str | Path):
        p = Path(path)
        file = p / "tokenizer.json" if p.is_dir() else p
        self._hf = None
        if file.name == "tokenizer.json" and file.is_file():
            from tokenizers import Tokenizer as _Tok

            self._tok = _Tok.from_file(str(file))
            special = {
                t.content for t in self._tok.get_added_tokens_decoder().values() if t.special
            }
            vocab = self._tok.get_vocab()
            self.vocab_size = self._tok.get_vocab_size()
            self._special_ids = {vocab[t] for t in special if t in vocab}
        elif p.is_dir():
            try:
                from transformers import AutoTokenizer

                self._hf = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - any loader failure is one message
                raise TokenizerError(f"cannot load a tokenizer from {p}: {exc}") from None
            self.vocab_size = len(self._hf)
            self._special_ids = set(self._hf.all_special_ids)
        else:
            raise TokenizerError(f"no tokenizer at {p} (expected a folder or a tokenizer.json)")
        self.path = str(p)

    def encode(self, text: str) -> list[int]:
        if self._hf is not None:
            return list(self._hf.encode(text, add_special_tokens=False))
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        if self._hf is not None:
            return self._hf.decode(ids, skip_special_tokens=True)
        return self._tok.decode(ids, skip_special_tokens=True)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def normal_ids(self) -> list[int]:
        """Ids that are not special tokens."""
        return [i for i in range(self.vocab_size) if i not in self._special_ids]

    def word_ids(self) -> list[int]:
        """Ids of whole words with a leading space that re-encode to themselves alone.

        A prompt made of these has exactly as many tokens as words: the pre-tokenizer
        splits at each space, so neighbouring words never merge. (SentencePiece's "▁"
        words behave the same.) Falls back to :meth:`normal_ids` for odd vocabularies.
        """
        if getattr(self, "_word_ids", None) is None:
            ids = self.normal_ids()
            texts = [self.decode([i]) for i in ids]
            words = []
            for i, t in zip(ids, texts, strict=True):
                word = len(t) > 1 and t[0] == " " and t[1:].isalpha() and t[1:].isascii()
                if word and self.encode(t) == [i]:
                    words.append(i)
            self._word_ids = words if len(words) >= 64 else ids
        return self._word_ids
