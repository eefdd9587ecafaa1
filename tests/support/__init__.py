"""The test code more than one tier shares, and the only test code one tier
may import from another (``tests/unit/test_tests_structure.py``): a tier's
own helpers live in its folder, its ``conftest.py`` holds only its fixtures
and hooks."""
