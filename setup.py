"""Map the two source roots into one distribution.

``common/`` is importable as ``pocforge`` and ``kernels/`` as ``pocforge.kernels``;
subpackages are discovered, so a new folder needs no edit here.  (hatchling's source
remapping builds a wheel but fails as an editable install; setuptools' package_dir works.)
"""

from setuptools import find_packages, setup

ROOTS = {"pocforge": "common", "pocforge.kernels": "kernels"}

packages, package_dir = [], {}
for name, root in ROOTS.items():
    packages.append(name)
    package_dir[name] = root
    for sub in find_packages(root):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{root}/{sub.replace('.', '/')}"

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={
        "pocforge": ["**/*.yaml", "**/*.json", "**/*.j2"],
        "pocforge.kernels": ["**/*.json", "**/*.yaml"],
    },
    include_package_data=True,
)
