# Appended to each of the kit's sitecustomize files a launch carries (the patch overlay's,
# rocprofv3's gate; frameworks/site_files.py): Python runs only the first sitecustomize on
# the path, so each runs the one it shadows, the next after its own folder, as Python would
# have without it. Two of the kit's chain this way in either order. Standard library only.


def _run_shadowed_sitecustomize():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    past_here = False
    for entry in sys.path:
        folder = os.path.abspath(entry or os.curdir)
        if folder == here:
            past_here = True
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if past_here and os.path.isfile(candidate):
            with open(candidate, "rb") as f:
                code = compile(f.read(), candidate, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": candidate})
            return


_run_shadowed_sitecustomize()
