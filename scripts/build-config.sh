# build-config.sh — sourced by demo.sh and test.sh (and, for its own folder, test-sanitizers.sh):
# the one configuration of build/, so that the tests after the demo (or the demo after the tests)
# compile nothing of lib/ again.
# Line tables only (-g1): enough for backtraces and sanitizer reports, a third less compile time
# than full debug information. The test code itself builds at -O0 (test/CMakeLists.txt).
# The test targets are configured always; demo.sh builds only the `kdflow` target.
KDFLOW_BUILD_CONFIG=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
  -DKDFLOW_BUILD_TESTS=ON)
# ccache (install-deps.sh installs it): a compiled object is kept under a hash of its
# preprocessed source and flags, so a second build of the same code, in this clone or a clean
# one elsewhere, compiles nothing. Paths under the clone are hashed relative to it
# (CCACHE_BASEDIR) and the working folder is left out of the hash (CCACHE_NOHASHDIR), so a clone
# in another folder hits too; its line tables then name the first clone's folder.
KDFLOW_CCACHE=()
if command -v ccache >/dev/null 2>&1 && [ "${KDFLOW_NO_CCACHE:-0}" != 1 ]; then
  KDFLOW_CCACHE=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
else
  KDFLOW_CCACHE=(-UCMAKE_CXX_COMPILER_LAUNCHER -UCMAKE_C_COMPILER_LAUNCHER)
fi
KDFLOW_BUILD_CONFIG+=("${KDFLOW_CCACHE[@]}")
