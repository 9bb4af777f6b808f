"""``roofline-ext check``: is this card as fast as it should be, and if not, why (docs/check.md)."""
