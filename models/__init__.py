"""Model build code and the metadata every served model directory carries."""
