from tests.unit.tiny_upstream import one_patch, upstream  # noqa: F401  (fixtures)
