"""Programs for XLA's CPU backend, chosen over the portable programs by ``dispatch``."""
