# Sourced by compat/run-pyzmq-tests.sh and scripts/test-wheel.sh: what both need to run pyzmq's own
# test suite (the selection, the notes and the runner are compat/pyzmq_compat.py's).

# pyzmq's test requirements (what installs cleanly from PyPI); the test selection depends on them
# (tests importorskip tornado, gevent, numpy, ...), so every run installs the same set.
PYZMQ_TEST_DEPS=(pytest pytest-timeout pytest-asyncio pytest-rerunfailures tornado gevent msgpack numpy cython setuptools)

# pyzmq_sdist_tests PIP BUILD VERSION: downloads pyzmq VERSION's sdist into BUILD (once) and
# extracts its tests to BUILD/pyzmq-tests-VERSION (tests/ + pytest.ini); prints that folder.
# Only pyzmq comes as an sdist; its build requirements (pip prepares the sdist's metadata) as wheels.
# Called in a command substitution (no errexit there): each step returns on failure.
pyzmq_sdist_tests() {
    local pip=$1 build=$2 version=$3
    local sdist="$build/pyzmq-$version.tar.gz" tests="$build/pyzmq-tests-$version"
    if [ ! -f "$sdist" ]; then
        "$pip" download -q --no-binary pyzmq --no-deps "pyzmq==$version" -d "$build" >&2 || return 1
    fi
    if [ ! -f "$tests/pytest.ini" ]; then
        # pyzmq >= 26 keeps its tests in tests/ (older: zmq/tests/); they must not run from the
        # source tree, whose zmq/ package would shadow the installed one
        rm -rf "$tests" "$build/pyzmq-$version"
        tar -xzf "$sdist" -C "$build" || return 1
        mkdir -p "$tests"
        local src="$build/pyzmq-$version"
        if [ -d "$src/tests" ]; then
            cp -r "$src/tests" "$tests/tests" || return 1
        else
            cp -r "$src/zmq/tests" "$tests/tests" || return 1
        fi
        cp "$src/pytest.ini" "$tests/" 2>/dev/null || printf '[pytest]\n' > "$tests/pytest.ini"
        if [ -d "$src/mypy_tests" ]; then cp -r "$src/mypy_tests" "$tests/"; fi
    fi
    echo "$tests"
}
