"""Drafts: the verifier a draft serves, its layer config, reference drafts, and what is benched."""
