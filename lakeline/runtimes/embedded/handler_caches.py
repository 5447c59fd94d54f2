"""The clients and configuration each deployed function's handler caches per execution environment (its
``runtime()``), forgotten when the endpoint they were built against changes."""

from __future__ import annotations

import sys


def reset_handler_caches() -> None:
    """Forget the clients and configuration every handler caches per execution environment, so that the next
    invocation builds them against the current endpoint and environment variables: a process that starts a second
    local cloud (a test session, a long-lived command) would otherwise reach the first one's stopped endpoint. Only
    handlers imported already hold any (nothing is imported here)."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name.startswith("lambdas.") and name.endswith(".handler")):
            continue
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and getattr(value, "__module__", None) == module.__name__:
                clear()
