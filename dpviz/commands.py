"""The commands beside a run of `dpviz` (and `python -m dpviz`): dpviz/command.py starts them, dpviz/cli.py's
--help lists them. Each module's main(argv, prog) -> exit status runs one."""

# name -> (its module, what it does, as --help says it)
COMMANDS = {
    "plan": ("dpviz.cli_plan", "plans a model's memory per device under every engine at real size and runs nothing"),
    "compare": ("dpviz.cli_compare", "runs the same settings under two engines and compares them"),
    "page": ("dpviz.cli_page", "opens the page"),
}
