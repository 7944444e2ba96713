# The failures of a run of the integration tests (`integration.test -test.v`), for the end of its output:
# each failed test's own lines (those under its "=== RUN/CONT/NAME" headers, 80 at most), then the run's
# FAIL line, a panic, and what the harness said of the stack.
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
/^(PASS|FAIL)$/ { cur = ""; summary = summary $0 "\n"; next }
/^[[:space:]]*--- FAIL: / { if (!($3 in failed)) { failed[$3] = 1; order[++n] = $3 }; next }
/^[[:space:]]*--- (PASS|SKIP): / { next }
/^panic: / { cur = ""; panicking = 1 }
panicking { if (panicked++ < 40) summary = summary $0 "\n"; next }
/^integration: / { summary = summary $0 "\n"; next }
cur != "" { if (count[cur]++ < 80) out[cur] = out[cur] $0 "\n" }
END {
	for (i = 1; i <= n; i++) {
		t = order[i]
		printf "--- FAIL: %s\n%s", t, out[t]
		if (count[t] > 80) printf "    (%d lines more)\n", count[t] - 80
	}
	printf "%s", summary
}
