"""The HTML layer: the Python-Markdown extensions that turn verified pages into elements.

``extension`` renders a page's report (claims, the ``check`` fence, the reveal of Solution and
Answer), ``frame`` puts a problem's title, conventions, Draws on / Used by and the legend around it
as elements, ``render`` turns records into elements, ``components`` are the lessons' interactive
blocks. ``session`` is what a build hands the extension. It imports the core and run layers, never
MkDocs, and never reads back HTML it wrote.
"""
