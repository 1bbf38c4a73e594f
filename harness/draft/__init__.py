"""Drafts from any source: recognise their format, check they fit a verifier, convert them."""
