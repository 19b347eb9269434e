"""What every `Make.<arch>` clusterbench generates holds, whichever official code it is for.

HPL's make system (bench/hpl/makearch.py) and HPCG's, which follows it (bench/hpcg/build.py), read
the same shell tools from their `Make.<arch>`; each code's own variables are generated in its package.
"""

SHELL_TOOLS = ("SHELL        = /bin/sh", "CD           = cd", "CP           = cp", "LN_S         = ln -fs",
               "MKDIR        = mkdir -p", "RM           = /bin/rm -f", "TOUCH        = touch")
