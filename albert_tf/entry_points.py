"""A command module's `main` and `entry`, made once for every command (albert_tf's, tools/,
benchmarks/) from its `define_flags` and `run` (albert_tf.cli's style):

    main, entry = entry_points.command("plot_metrics", define_flags, run)

    if __name__ == "__main__":
        entry()

`main(argv=None)` is `NAME ARGV` in this process: it returns the exit status of
`albert_tf.cli.main` (the command's own flags, the process's state put back; not undone:
`cli.IRREVERSIBLE`), `argv` being the arguments without the program name (default
sys.argv[1:]). `entry()` (a console script, `python NAME.py`) exits with `main()`'s status.
`cli.main` is looked up at each call.
"""

import sys


def command(name, define_flags, run):
    """(main, entry) of the command `name` (module docstring).

    Args:
        name: the command's name, for its messages (`name: error: ...`).
        define_flags: defines the command's flags in the FlagValues it is given.
        run: `run(flags)` does the work.
    """

    def main(argv=None):
        from albert_tf import cli

        return cli.main(name, define_flags, run, argv)

    def entry():
        sys.exit(main())

    main.__doc__ = (f"`{name} ARGV` in this process: returns its exit status (albert_tf.entry_points; "
                    "argv: the arguments, without the program name, default sys.argv[1:]).")
    entry.__doc__ = f"`{name}` as a program: exits with main()'s status."
    return main, entry
