"""Storage: the models, the migrations and the single data-access layer."""
