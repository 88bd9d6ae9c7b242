"""The console's pages, one module each; ``register(app)`` adds its routes."""
