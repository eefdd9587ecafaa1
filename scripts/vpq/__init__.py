"""vpq: a quilt-style patch queue over a pinned vLLM release.

One module per noun: ``lock`` (upstream.lock), ``fetch`` (hash-checked
download cache), ``series`` (series file and patch mails), ``git`` (thin git
runner), ``tree`` (upstream trees as git commits), ``queue`` (apply/export
the series), ``wheel`` (overlay build), ``audit`` (built vs upstream wheel),
``cli`` (argument parsing and error mapping).
"""

__all__ = ["VpqError"]

from vpq.errors import VpqError
