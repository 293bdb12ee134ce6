"""An example codyra method kind registered from a package of its own (``mylora``)."""
