# Sourced by .ci/run and scripts/test.sh: cpu_children sets CPU_CHILDREN to the user + system
# seconds of the calling shell's waited-for children (the second line of bash's `times`).
# `times` must run in that shell itself: in a pipe or a command substitution it runs in a fork,
# whose children are not the caller's, and reports 0.
cpu_children() {
  local f
  f=$(mktemp "${TMPDIR:-/tmp}/rzmq-cpu.XXXXXX")
  times >"$f"
  CPU_CHILDREN=$(tail -1 "$f" | awk '{ split($1, u, "m"); split($2, s, "m");
    printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
  rm -f "$f"
}
