//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// secrets are what the tests came to hold that no log may show, each with what it is. They are
// gathered where they reach the tests, not test by test, so that one a new test makes is looked for
// too: the stack's users' tokens (the service's own among them) and its signing keys, read at the
// start (holdStackSecrets); every token the apiserver issues to the tests' clients and every value of
// a Secret it shows them or takes from them (a tenant's token, a Ray cluster's token, a key a service
// made), on their way (seeingCredentials); every secret the service answers (a webhook subscription's),
// where its answers are read (sendTo). A test that makes a secret another way calls holdSecret.
var secrets struct {
	sync.Mutex
	of       map[string]string // the secret -> what it is
	short    int               // values of Secrets too short to look for without finding them by chance
	problems []string          // what could not be read, and so cannot be looked for
}

// leastSecret is the shortest value of a Secret looked for: a shorter one ("true", a port) would be
// found in a log by chance. Tokens and keys are far longer.
const leastSecret = 16

// holdSecret adds secret, which is what, to what the logs are searched for.
func holdSecret(what, secret string) {
	secrets.Lock()
	defer secrets.Unlock()
	if secrets.of == nil {
		secrets.of = map[string]string{}
	}
	if secret == "" {
		secrets.problems = append(secrets.problems, "no value of "+what+" to look for")
		return
	}
	if _, ok := secrets.of[secret]; !ok {
		secrets.of[secret] = what
	}
}

// heldSecrets returns the secrets held so far (secret -> what it is), the values of Secrets left out
// for being short, and what could not be read.
func heldSecrets() (map[string]string, int, []string) {
	secrets.Lock()
	defer secrets.Unlock()
	return maps.Clone(secrets.of), secrets.short, slices.Clone(secrets.problems)
}

// holdStackSecrets holds every token of the stack's users (tokens.csv: the service's own, ray-service,
// and those the tests act as) and the keys the service signs its templates and its audit trail with.
func holdStackSecrets(state string, vars map[string]string) error {
	f, err := os.Open(filepath.Join(state, "tokens.csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	users := 0
	for lines.Scan() {
		token, rest, _ := strings.Cut(lines.Text(), ",")
		user, _, _ := strings.Cut(rest, ",")
		holdSecret("the token of the stack's user "+user, token)
		users++
	}
	if err := lines.Err(); err != nil {
		return err
	}
	if users == 0 {
		return fmt.Errorf("no token in %s", filepath.Join(state, "tokens.csv"))
	}
	for _, file := range []string{"TEMPLATE_KEY_FILE", "AUDIT_KEY_FILE"} {
		key, err := os.ReadFile(vars[file])
		if err != nil {
			return err
		}
		holdSecret("the key of "+file, strings.TrimSpace(string(key)))
	}
	return nil
}

// seeingCredentials makes cfg's clients hold every token a TokenRequest answers and every value of a
// Secret read or written through them.
func seeingCredentials(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return credentialsSeen{rt} })
	return cfg
}

type credentialsSeen struct{ next http.RoundTripper }

func (c credentialsSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(req)
	path := req.URL.Path
	parts := strings.Split(strings.TrimSuffix(path, "/"), "/")
	tokenRequest := len(parts) >= 4 && parts[len(parts)-1] == "token" && parts[len(parts)-3] == "serviceaccounts"
	secretsPath := len(parts) >= 2 && slices.Contains(parts[len(parts)-2:], "secrets")
	if err != nil || res.StatusCode >= 300 || req.URL.Query().Get("watch") != "" || req.Method == http.MethodDelete ||
		(!tokenRequest && !secretsPath) {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	obj, _, derr := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	var found []corev1.Secret
	switch o := obj.(type) {
	case *authenticationv1.TokenRequest:
		holdSecret(fmt.Sprintf("a token of the service account %s/%s", parts[len(parts)-4], parts[len(parts)-2]), o.Status.Token)
	case *corev1.Secret:
		found = append(found, *o)
	case *corev1.SecretList:
		found = append(found, o.Items...)
	default:
		// An answer that cannot be read is noted, so that no credential goes unsearched unseen; another
		// object (a namespace named secrets) holds none.
		if derr != nil {
			secrets.Lock()
			secrets.problems = append(secrets.problems, fmt.Sprintf("the answer to %s %s (%s) could not be read for credentials: %v",
				req.Method, path, res.Header.Get("Content-Type"), derr))
			secrets.Unlock()
		}
	}
	for _, s := range found {
		for k, v := range s.Data {
			if len(v) < leastSecret {
				secrets.Lock()
				secrets.short++
				secrets.Unlock()
				continue
			}
			holdSecret(fmt.Sprintf("the key %s of the Secret %s/%s", k, s.Namespace, s.Name), strings.TrimSpace(string(v)))
		}
	}
	return res, nil
}

// holdAnsweredSecret holds the secret in the data of an answer of the service (a webhook subscription's,
// shown once, when it is made).
func holdAnsweredSecret(method, path string, data json.RawMessage) {
	var d struct {
		Secret string `json:"secret"`
	}
	if len(data) > 0 && data[0] == '{' && json.Unmarshal(data, &d) == nil && d.Secret != "" {
		holdSecret("the secret answered to "+method+" "+path, d.Secret)
	}
}

// checkLogsHoldNoTokens checks that no secret the tests held (secret -> what it is) appears in any log
// line of the run: the services' (the shared one and every instance the tests started, each of whose
// logs must be there) and the stack's. TestMain runs it once every test that ran has logged what it logs.
func checkLogsHoldNoTokens(state string, held map[string]string, launched []string) ([]string, error) {
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
		for secret, what := range held {
			if strings.Contains(string(data), secret) {
				problems = append(problems, fmt.Sprintf("%s in %s", what, filepath.Base(f)))
			}
		}
	}
	slices.Sort(problems)
	fmt.Printf("logs against tokens: %d log files (%d of service instances), %d bytes, searched for %d secrets\n",
		len(files), len(launched), read, len(held))
	return problems, nil
}
