"""dpviz's Streamlit page, in parts: app.py runs `main`.

    main.py      the page from top to bottom
    sidebar.py   the link applied once, the settings' widgets, each engine's options, the presets
    running.py   a run: from the session's recent runs, or recorded once the server has room
    upload.py    a trace file the visitor uploads, checked and drawn instead of a run
    tabs.py      the views' tabs, and two engines' runs compared side by side
    findings.py  the key figures, the findings and the files to download
    state.py     the session state's keys, the engine choice, what every part shares

Only this package imports Streamlit; the rest of dpviz is plain Python.
"""
