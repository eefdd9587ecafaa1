"""The tool's base exception.

Each module defines its own subclass (``LockError`` in ``lock``, ...). A
message is one paragraph that names the file, patch or hunk at fault; the
CLI prints it without a traceback and exits with ``exit_code``.
"""


class VpqError(Exception):
    """Base of every error the tool reports to a user.

    ``exit_code`` is 1 for a user-fixable problem (bad input, failed patch),
    2 for a usage error.
    """

    exit_code: int = 1


class UsageError(VpqError):
    """Bad command-line usage."""

    exit_code = 2
