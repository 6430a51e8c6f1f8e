# Sourced by scripts/build-versitygw.sh and scripts/build-weed.sh, each of
# which builds one Go tool into the directory named by its argument.

# bin_dir [DIR]: sets BIN_DIR to DIR (default .tools/bin), created, as an
# absolute path.
bin_dir() {
  BIN_DIR="${1:-.tools/bin}"
  mkdir -p "$BIN_DIR"
  BIN_DIR="$(cd "$BIN_DIR" && pwd)"
}
