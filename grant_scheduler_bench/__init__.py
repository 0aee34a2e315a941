"""grant_scheduler's benchmark: the strategies side by side on one database.

Beside the plugin, never inside it: it drives the product only through
``grant_scheduler.api`` (and reads option and URL text from
``grant_scheduler.conf`` and ``grant_scheduler.urls``), and nothing in
``grant_scheduler`` imports it.  Its own dependencies come with the
``bench`` extra: ``pip install 'grant_scheduler[bench]'``.
"""
