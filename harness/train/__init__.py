"""Draft training: prompts, responses, hidden states, vocabulary, speculators training."""
