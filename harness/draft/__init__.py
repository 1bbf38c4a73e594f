"""Drafts: the verifier a draft serves, its layer config, reference drafts, what is benched; drafts
from any source: their format recognised, checked against a verifier, converted."""
