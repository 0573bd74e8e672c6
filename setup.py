"""Build hook of the course package (the metadata is in pyproject.toml).

The GELU kernel's sources live in the repository's ``cuda/`` folder, beside the package,
where ``andrea_ref.kernels.loader`` finds them in a checkout. A wheel has no checkout
around it, so the build copies them into the package as ``andrea_ref/kernels/csrc/``,
the loader's fallback. The sdist carries ``cuda/`` itself (MANIFEST.in).
"""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
KERNEL_SOURCES = ("*.cu", "*.cpp", "*.h")


class build_py_with_kernel_sources(build_py):
    def run(self):
        super().run()
        sources = sorted(p for pattern in KERNEL_SOURCES for p in (HERE / "cuda").glob(pattern))
        if not any(p.name == "gelu_math.h" for p in sources):
            raise SystemExit(f"kernel sources not found in {HERE / 'cuda'}")
        dest = Path(self.build_lib) / "andrea_ref" / "kernels" / "csrc"
        dest.mkdir(parents=True, exist_ok=True)
        for src in sources:
            self.copy_file(str(src), str(dest / src.name))


setup(cmdclass={"build_py": build_py_with_kernel_sources})
