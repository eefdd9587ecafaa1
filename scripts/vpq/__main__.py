import sys
from pathlib import Path

from vpq.core.supported import require_supported_python

if sys.argv[1:2] == ["preflight"]:
    # The preflight needs only the standard library (scripts/verify_install.py),
    # not the tool's dependencies: any Python runs it, e.g. the serving venv's,
    # whose vLLM it then asks.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import verify_install

    sys.exit(verify_install.preflight_main(sys.argv[2:], prog="python -m vpq preflight"))

require_supported_python()  # the tool, not the preflight: see vpq.core.supported

from vpq.cli import main  # noqa: E402

sys.exit(main())
