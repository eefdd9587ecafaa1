"""The scripted fixture's token script is what the fixture tokenizer says it is."""

from __future__ import annotations

from vpq.checkpoints import fixture, scripted


def test_script_is_the_tokenizers_encoding_of_its_text() -> None:
    tok = fixture.build_tokenizer()
    assert tok.decode(list(scripted.SCRIPT), skip_special_tokens=False) == scripted.SCRIPT_TEXT
    assert tok.encode(scripted.SCRIPT_TEXT).ids == list(scripted.SCRIPT)


def test_no_token_appears_twice_in_the_script() -> None:
    """The target reads only the current token: a repeated token could not
    be followed by two different ones."""
    assert len(set(scripted.SCRIPT)) == len(scripted.SCRIPT)


def test_the_script_fits_the_residual_stream() -> None:
    dims = {scripted.code_dim(c) for c in scripted.codes()}
    dims |= {scripted.slot_dim(s, c) for s in (0, 1) for c in scripted.codes()}
    assert len(dims) == 3 * (len(scripted.SCRIPT) + 1) and max(dims) < fixture.HIDDEN
    assert 0 not in dims  # dimension 0 is the constant


def test_next_token_walks_the_script_and_enters_it_from_anywhere() -> None:
    s = scripted.SCRIPT
    assert [scripted.next_token(t) for t in s] == [*s[1:], s[0]]
    assert scripted.next_token(7) == s[0]


def test_random_attention_fills_only_the_attention_projections_seeded() -> None:
    """``randomize_attention`` (the MLA numerics target): every MLA projection
    gets seeded values, the same for the same seed; nothing else changes."""
    import numpy as np

    text = fixture.tiny_text_config()
    base = scripted._text_weights(text)
    noisy = scripted.randomize_attention(base, seed=0)
    changed = {n for n in base if not np.array_equal(base[n], noisy[n])}
    projections = {n for n in base if n.rsplit(".", 2)[-2] in scripted.ATTENTION_STD}
    assert changed == {n for n in projections if ".self_attn." in n}
    assert len(changed) == 5 * int(text["num_hidden_layers"])
    again = scripted.randomize_attention(base, seed=0)
    assert all(np.array_equal(noisy[n], again[n]) for n in changed)
