"""Chess rules in compiled code."""
