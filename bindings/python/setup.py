"""Build hook: the wheel carries libboxlite.so, boxlite-shim, boxlite-net, virtiofsd and the guest
(kernel and initramfs) in boxlite/_lib/, where the library looks for them.

They come from $BOXLITE_BUILD_DIR, by default the repository's build/ (built
by `make build`). The wheel is tagged py3-none-<platform>: it holds no Python
extension (cffi's ABI mode), but native files for one platform; `make dist`
builds them against an old glibc (packaging/native.sh) and `auditwheel repair`
gives the wheel its manylinux tag.

The sdist carries only the Python sources: building a wheel from it needs
BOXLITE_BUILD_DIR, and without it the build stops saying so (pip falls back to
the sdist only where no wheel fits the platform).
"""

import os
import shutil
import stat

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = ["libboxlite.so", "boxlite-shim", "boxlite-net", "virtiofsd", "guest/vmlinuz", "guest/initramfs.cpio"]
EXECUTABLE = {"libboxlite.so", "boxlite-shim", "boxlite-net", "virtiofsd"}


def build_dir() -> str:
    return os.path.abspath(os.environ.get("BOXLITE_BUILD_DIR") or os.path.join(HERE, "..", "..", "build"))


def refusal(src: str, missing: list) -> str:
    what = ("libboxlite.so, boxlite-shim, boxlite-net, virtiofsd and guest/{vmlinuz,initramfs.cpio}")
    if os.path.isfile(os.path.join(HERE, "..", "..", "go.mod")):  # in the repository
        return ("boxlite: cannot build the package: %s missing in %s.\n"
                "Run `make build` in the repository root first, or set BOXLITE_BUILD_DIR to a "
                "directory holding %s." % (", ".join(missing), src, what))
    return ("boxlite-go: this source distribution cannot be built by itself: a box needs native parts "
            "(%s) that are built from the Go repository, not from this sdist.\n"
            "pip chose the sdist because no boxlite-go wheel fits this platform: the wheels are for "
            "Linux x86_64 with glibc (manylinux). On such a machine, check `pip debug --verbose` for "
            "the tags it accepts; elsewhere, build from the repository (make dist) or set "
            "BOXLITE_BUILD_DIR to a directory holding them." % what)


class BuildPy(build_py):
    def run(self):
        super().run()
        src = build_dir()
        missing = [a for a in ASSETS if not os.path.isfile(os.path.join(src, a))]
        if missing:
            raise SystemExit(refusal(src, missing))
        dst = os.path.join(self.build_lib, "boxlite", "_lib")
        for a in ASSETS:
            target = os.path.join(dst, a)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(src, a), target)
            mode = 0o755 if a in EXECUTABLE else 0o644
            os.chmod(target, mode | stat.S_IRUSR)


class BinaryDistribution(Distribution):
    """Native files inside: install to platlib, build a platform wheel."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
