"""The MkDocs layer: the plugin and what only a MkDocs build needs.

``plugin`` adds the problems to the site, runs the checks, calls the book's verification pass and
hands each page's report to the Markdown extension; ``config`` is the plugin's option schema and
reads a book's layout from mkdocs.yml; ``nav`` builds the Problems navigation; ``runreport`` writes
the run report page; ``serve`` keeps ``mkdocs serve`` quick. Only the CLI imports it.
"""
