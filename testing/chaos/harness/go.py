"""Building the Go programs of the repository offline, as clients/CMakeLists.txt does:
msgpack from Debian's source through go.mod's replace lines, caches in the build tree."""
import os
import shutil
import subprocess


def go_env(build):
    """os.environ with what `go build` needs here: no module proxy, caches under BUILD."""
    return dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off",
                GOCACHE=os.path.join(build, "go", "cache"),
                GOPATH=os.path.join(build, "go", "path"))


def go_build(build, module_dir, package, out):
    """Builds PACKAGE of the module in MODULE_DIR into OUT; False when Go is not installed."""
    go = shutil.which("go")
    if not go:
        return False
    subprocess.run([go, "build", "-o", out, package], cwd=module_dir, env=go_env(build),
                   check=True, timeout=600)
    return True
