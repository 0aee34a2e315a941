"""Sphinx configuration of grant_scheduler's release notes.

Built by ``tox -e releasenotes`` (``sphinx-build -W -b html
releasenotes/source releasenotes/build/html``) from the notes that
``reno new <slug>`` writes under ``releasenotes/notes``; reno reads them
from git's history, so a note shows once committed.
"""

project = "grant_scheduler Release Notes"
copyright = "grant_scheduler developers"
author = "grant_scheduler developers"

extensions = [
    "reno.sphinxext",
]

root_doc = master_doc = "index"
exclude_patterns = []
highlight_language = "none"
pygments_style = "sphinx"

html_theme = "alabaster"
html_static_path = []
html_show_sourcelink = False
