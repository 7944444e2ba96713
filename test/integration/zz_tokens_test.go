//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// checkLogsHoldNoTokens checks that no token the tests used appears in any log line of the run: the
// services' (the shared one and every instance the tests started, each of whose logs must be there)
// and the stack's. TestMain runs it once every test that ran has logged what it logs.
func checkLogsHoldNoTokens(state string, tokens map[string]string, launched []string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(state, "logs", "*.log"))
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, name := range launched {
		if !slices.Contains(files, filepath.Join(state, "logs", name)) {
			problems = append(problems, fmt.Sprintf("the log of the service instance %s is not there", name))
		}
	}
	read := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		read += len(data)
		for user, token := range tokens {
			if token == "" {
				problems = append(problems, fmt.Sprintf("no token of %s to look for", user))
				continue
			}
			if strings.Contains(string(data), token) {
				problems = append(problems, fmt.Sprintf("%s's token in %s", user, filepath.Base(f)))
			}
		}
	}
	fmt.Printf("logs against tokens: %d log files (%d of service instances), %d bytes, searched for %d tokens\n",
		len(files), len(launched), read, len(tokens))
	return problems, nil
}
