"""The scripted fixture's token script is what the fixture tokenizer says it is."""

from __future__ import annotations

from vpq import fixture, scripted


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
