"""The failure catalogue (``catalogue``) and its runner (``case``)."""
