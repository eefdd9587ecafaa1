"""speculators 0.9.0's own reading code on files our engine extracted.

``tests/engine/test_extract_hidden_states.py`` checks the layout that
speculators reads; this runs the library's code itself: ``check_hidden_states``
(``speculators/data_generation/offline.py``, what ``generate_offline_data``
and the online dataset run on each file) and the slicing of
``train/data.py``'s ``_get_raw_data`` (``hidden_states[:, :-1].flatten(1)``
as the aux states, ``hidden_states[:, -1]`` as ``verifier_last_hidden_states``).

Run by hand on 2026-12-03 with the engine tier's patched venv (torch 2.10,
safetensors; the package's ``__init__`` needs transformers 5, so
``offline.py`` is loaded by path)::

    pip download speculators==0.9.0 --no-deps -d /tmp/w && unzip -q /tmp/w/*.whl -d /tmp/s
    ~/.cache/vpq/envs/engine-patched-<key>/bin/python check_extracted.py \\
        /tmp/s/speculators/data_generation/offline.py <pytest tmp>/extract-patched0/hidden_states

All seven files of the case (six token prompts, one image request) passed.
Not run by the test suite.
"""

import importlib.util
import sys
from pathlib import Path

from safetensors.torch import load_file

spec = importlib.util.spec_from_file_location("offline", sys.argv[1])
assert spec is not None and spec.loader is not None
offline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(offline)
for path in sorted(Path(sys.argv[2]).glob("*.safetensors")):
    loaded = load_file(str(path))
    offline.check_hidden_states(loaded, loaded["token_ids"].tolist())
    aux = loaded["hidden_states"][:, :-1].flatten(1)
    last = loaded["hidden_states"][:, -1]
    print(
        path.name,
        tuple(loaded["hidden_states"].shape),
        loaded["hidden_states"].dtype,
        "aux",
        tuple(aux.shape),
        "last",
        tuple(last.shape),
    )
