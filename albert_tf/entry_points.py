"""A command module's `main` and `entry`, made once for every command (albert_tf's and the
scripts beside the package) from its `define_flags` and `run`:

    main, entry = entry_points.command("plot_metrics", define_flags, run)

    if __name__ == "__main__":
        entry()

`main(argv=None)` runs the command in this process through `albert_tf.cli.main` (looked up
at each call) and returns its exit status, the outputs it held let go (storage.lock);
`entry()` exits with it.
"""

import sys


def command(name, define_flags, run):
    """(main, entry) of the command `name` (used in its messages); `define_flags` defines its
    flags in the FlagValues it is given, `run(flags)` does the work."""

    def main(argv=None):
        from albert_tf import cli
        from albert_tf.storage import lock

        with lock.command(name):  # the outputs it holds (storage.lock) are let go when it ends
            return cli.main(name, define_flags, run, argv)

    def entry():
        sys.exit(main())

    main.__doc__ = (f"`{name} ARGV` in this process: returns its exit status (albert_tf.entry_points; "
                    "argv: the arguments, without the program name, default sys.argv[1:]).")
    entry.__doc__ = f"`{name}` as a program: exits with main()'s status."
    return main, entry
