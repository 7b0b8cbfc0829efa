"""``python -m llama_cpp.server`` that also writes the usage of every completion it
computes to the JSON-lines file named by ``LLAMA_USAGE_LOG``: the server's own counts,
including answers computed for a client that had given up waiting (the real_llm tests
compare them with swarm's ledger), and a line per completion started and ended to
``LLAMA_CALLS_LOG`` (idle when they are as many). Arguments are the server's."""

from __future__ import annotations

import functools
import json
import os
import threading
from typing import Any

import llama_cpp
from llama_cpp.server.__main__ import main

_lock = threading.Lock()
_compute = llama_cpp.Llama.create_chat_completion


@functools.wraps(_compute)
def _counted(self: Any, *args: Any, **kwargs: Any) -> Any:
    _log_call("start")
    try:
        result = _compute(self, *args, **kwargs)
    finally:
        _log_call("end")
    usage = result.get("usage") if isinstance(result, dict) else None
    if usage:
        line = json.dumps({"prompt_tokens": usage["prompt_tokens"],
                           "completion_tokens": usage["completion_tokens"],
                           "max_tokens": kwargs.get("max_tokens")})  # fmt: skip
        with _lock, open(os.environ["LLAMA_USAGE_LOG"], "a") as out:
            out.write(line + "\n")
    return result


def _log_call(event: str) -> None:
    with _lock, open(os.environ["LLAMA_CALLS_LOG"], "a") as out:
        out.write(event + "\n")


llama_cpp.Llama.create_chat_completion = _counted  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
