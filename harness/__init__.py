"""harness: train EAGLE-3 drafts, serve them with vLLM, measure and gate acceptance."""

__version__ = "0.1.0"
