# ptxas-report.awk: one line per kernel from `ptxas -v` output (mk/cuda.mk,
# kernels-check). Variables: f (module), sm (SASS target).
/Compiling entry function/ {
  fn = $0; sub(/.*entry function '/, "", fn); sub(/'.*/, "", fn)
}
/bytes stack frame/ {
  stack = $0; sub(/^[ \t]*/, "", stack)
  split(stack, a, ", "); st = a[1]; sp = a[2] ", " a[3]
  spill = (sp !~ /^0 bytes spill stores, 0 bytes spill loads/)
}
/Used [0-9]+ registers/ {
  r = $0; sub(/^.*Used /, "", r)
  printf "%-26s %-6s %-24s %s; %s; %s%s\n", f, sm, fn, r, st, sp, (spill ? "  SPILL" : "")
}
