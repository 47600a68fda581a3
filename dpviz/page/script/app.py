"""The script Streamlit runs for `dpviz page`, the installed twin of the checkout's app.py.

It sits alone in its folder because Streamlit puts the script's folder first on sys.path: beside dpviz's own
modules, their names (config, trace, session...) would shadow other packages' for the whole page. The Streamlit
settings the page is made for (theme, no file watching, the upload limit) are in .streamlit/config.toml beside it,
where Streamlit looks for a script's own settings.
"""
from dpviz.engines.apart import warm

warm()  # first, once per server, as app.py: the runs' forkserver imports torch while the page's own modules load
from dpviz.page.main import main  # noqa: E402

if __name__ == "__main__":
    main()
