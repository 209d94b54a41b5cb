# The sandbox's first program: it runs inside the new namespaces, lowers
# the resource limits, installs dependencies when asked, and then becomes
# the model's program (execv: same process, nothing left behind).
#
# The limits are set here, not on bwrap, because of RLIMIT_NPROC: the
# kernel counts processes per user namespace and uid, and checks a new
# namespace against the limit its creator had. Set on bwrap, the limit
# would be checked against every process of the gateway's uid on the
# host; set in here, it counts this run's processes only.
#
# argv: cpu_seconds memory_bytes open_files file_bytes processes python
#       program [dependency ...]
import os
import resource
import sys

(cpu, mem, nofile, fsize, nproc), (python, program), deps = (
    map(int, sys.argv[1:6]),
    sys.argv[6:8],
    sys.argv[8:],
)


def limit(which, soft, hard=None):
    resource.setrlimit(which, (soft, soft if hard is None else hard))


# SIGXCPU at the limit (the gateway tells the model), SIGKILL a second
# later for code that catches it.
limit(resource.RLIMIT_CPU, cpu, cpu + 1)
limit(resource.RLIMIT_AS, mem)
limit(resource.RLIMIT_NOFILE, nofile)
# Python ignores SIGXFSZ, so a write past the limit fails with EFBIG
# ("File too large") rather than killing the program.
limit(resource.RLIMIT_FSIZE, fsize)
limit(resource.RLIMIT_NPROC, nproc)
# A core dump could be handed to the host's crash handler.
limit(resource.RLIMIT_CORE, 0)

# Tell the gateway the sandbox is up (fd 5), then close every descriptor
# but the standard ones: the program gets nothing else of bwrap's.
os.write(5, b"1")
os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])

if deps:
    import subprocess

    target = "/tmp/.deps"
    # --isolated: no configuration from the workspace or the environment;
    # --no-index: the wheelhouse only (there is no network anyway).
    r = subprocess.run(
        [python, "-m", "pip", "install", "--isolated", "--no-index",
         "--find-links", "/wheelhouse", "--target", target, "--no-cache-dir",
         "--disable-pip-version-check", "--no-warn-script-location",
         "--quiet", "--", *deps],
        stdin=subprocess.DEVNULL, stdout=2,
    )
    if r.returncode != 0:
        print("sandbox: the dependencies could not be installed from the "
              "wheelhouse (see above); the code did not run.", file=sys.stderr)
        sys.exit(2)
    os.environ["PYTHONPATH"] = os.environ.get("PYTHONPATH", "") + ":" + target

os.execv(python, [python, program])
