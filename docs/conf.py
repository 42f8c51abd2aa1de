# The documentation site: `python -m sphinx -W --keep-going -b html docs build/docs` (tests/run_all.sh
# builds it with warnings as errors). Pages are the Markdown files of this folder (MyST); the API
# reference (api.md) is generated from the docstrings of the installed stridex.
import stridex

project = "stridex"
release = version = stridex.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["runs", "_build"]
myst_heading_anchors = 3  # links to headings: [text](import.md#the-stream-argument)
autodoc_member_order = "bysource"
html_theme = "alabaster"
html_title = f"stridex {release}"
