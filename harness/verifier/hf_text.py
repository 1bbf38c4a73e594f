"""The verifier's text model in transformers, read through its VerifierLayout.

This is the training side's forward (hidden states on CPU, the agreement check). It loads only
the text model: for a multimodal checkpoint the layout's `text_prefix` (e.g. `language_model.`)
is stripped from the keys, and everything outside the text model is left unread.
"""

from __future__ import annotations

import re
from typing import Any

from harness.verifier.layout import VerifierLayout

# transformers reads Kimi's text model (model_type "kimi_k2") as its own DeepSeek-V3.
_MODEL_TYPE_ALIASES = {"kimi_k2": "deepseek_v3"}


def hf_text_config(text_config: dict[str, Any]):
    from transformers import AutoConfig

    cfg = dict(text_config)
    model_type = _MODEL_TYPE_ALIASES.get(cfg.get("model_type", ""), cfg.get("model_type"))
    cfg.pop("model_type", None)
    cfg.pop("architectures", None)
    cfg.pop("auto_map", None)
    # a config without model_type (None) is left to transformers to refuse
    return AutoConfig.for_model(model_type, **cfg)  # type: ignore[arg-type]


def load_text_model(layout: VerifierLayout, dtype: str = "float32"):
    """The verifier's causal LM from its checkpoint, eval mode, on CPU."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    config = hf_text_config(layout.text_config)
    kwargs: dict[str, Any] = {}
    if layout.text_prefix:
        kwargs["key_mapping"] = {"^" + re.escape(layout.text_prefix): ""}
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the vision tower's keys are expected to be left out
    try:
        model = AutoModelForCausalLM.from_pretrained(layout.path, config=config, dtype=getattr(torch, dtype), **kwargs)
    finally:
        hf_logging.set_verbosity(verbosity)
    model.eval()
    return model
