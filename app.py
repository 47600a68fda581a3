"""dpviz's page: pick the DataParallel tutorial's settings, run it live, see the scatter and the gather.

    streamlit run app.py

The page itself is dpviz.page (the sidebar, the runs, the tabs); running, checking and drawing live in the
rest of the dpviz package.
"""
from dpviz.engines.apart import warm

warm()  # first, once per server: the runs' forkserver imports torch while the page's own modules load
from dpviz.page.main import main  # noqa: E402

if __name__ == "__main__":
    main()
