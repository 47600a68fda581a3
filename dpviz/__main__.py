"""`python -m dpviz`: the same command as the installed `dpviz` (dpviz/command.py)."""

if __name__ == "__main__":  # a rank process started by multiprocessing imports this too
    from dpviz.command import main

    main(prog="python -m dpviz")
