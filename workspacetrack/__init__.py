"""Content-hashing tracker that versions in-place runs outside the operator's checkout."""
