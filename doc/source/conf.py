"""Sphinx configuration of grant_scheduler's documentation.

Built by ``tox -e docs`` (``sphinx-build -W -b html doc/source
doc/build/html``): every warning is an error.  The configuration reference
is generated from the option definitions by ``oslo_config.sphinxext``
through the ``oslo.config.opts`` entry points, so the project must be
installed where this runs.
"""

project = "grant_scheduler"
copyright = "grant_scheduler developers"
author = "grant_scheduler developers"

extensions = [
    "oslo_config.sphinxext",
]

root_doc = master_doc = "index"
exclude_patterns = []
# Literal blocks are shell commands, tables as the tools print them, and
# configuration files: highlighted only where a page asks for a language.
highlight_language = "none"
pygments_style = "sphinx"

html_theme = "alabaster"
html_theme_options = {
    "description": (
        "A grants table that closes the gap between Nova's scheduler "
        "choosing a host and the compute host claiming it"
    ),
    "page_width": "1100px",
    "body_max_width": "none",
}
html_static_path = []
html_show_sourcelink = False
