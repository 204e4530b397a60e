"""LLM backends behind one interface (``base.Backend``): script, openai, claude_code, codex, claw."""

from iterion.backends.base import ASK_USER_KEY, Backend, BackendError, BackendRequest, BackendResponse
from iterion.backends.registry import default_backend_name, get_backend, known_backends, register_backend

__all__ = ["ASK_USER_KEY", "Backend", "BackendError", "BackendRequest", "BackendResponse", "default_backend_name",
           "get_backend", "known_backends", "register_backend"]
