"""Where the engine runs: in this process (``local``), or in a detached Ray actor that every
control-plane process shares (``engine_actor``). :mod:`jigsaw_engine.api` hands both out."""
