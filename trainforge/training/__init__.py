"""The bundled training runtime (torch + standard library only): `python -m trainforge.training`."""
