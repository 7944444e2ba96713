# Sourced by the stack scripts: where the built binaries live.
# The cache key is a hash of the tools modules, the build script and the Go version, so a change to any
# of them builds again, and an unchanged tree reuses what an earlier run built.
STACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stack_key() {
  (cd "$STACK_DIR" && cat tools/*/go.mod tools/*/go.sum build.sh && go env GOVERSION GOARCH) | sha256sum | cut -c1-16
}
STACK_CACHE=${RAY_STACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ray-service}
STACK_BIN=${STACK_BIN:-$STACK_CACHE/stack-$(stack_key)/bin}
