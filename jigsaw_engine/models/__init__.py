"""Policy models: HF causal LMs loaded from a local directory, and tiny presets built here.

Nothing is downloaded: a real checkpoint is a local folder (``config.json``, safetensors,
``tokenizer.json``); a tiny one is built from a preset with a tokenizer trained on the task's
own text.
"""
