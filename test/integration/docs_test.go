//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// docExample is one runnable block of a page of docs/: a ```sh block after a mark
//
//	<!-- runnable: [STATUS ...] [stream] [until TEXT] -->
//
// STATUS is the HTTP status each curl of the block answers, in order; stream a Server-Sent Events request
// that curl follows until it is cut off; until TEXT that the block is run again until its output holds
// TEXT (an object on its way). A ```sh block with curl in it and no mark fails the test, unless marked
// <!-- not run: WHY --> (a command for another machine, such as helm's).
type docExample struct {
	page   string
	line   int
	script string
	want   []int
	stream bool
	until  string
}

var (
	runnableMark = regexp.MustCompile(`^<!-- runnable:(.*)-->$`)
	notRunMark   = regexp.MustCompile(`^<!-- not run: .+-->$`)
	statusLine   = regexp.MustCompile(`(?m)^@@status (\d{3})$`)
	literalURL   = regexp.MustCompile(`https?://[^\s"'$/]+`)
)

// docExamples reads the runnable blocks of a page, and fails the test on a curl left unmarked or a mark
// without its block.
func docExamples(t *testing.T, page string) []docExample {
	t.Helper()
	f, err := os.Open(filepath.Join(env.root, "docs", page))
	require.NoError(t, err)
	defer f.Close()
	var out []docExample
	var mark, prev string
	var markLine int
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line != "```sh" {
			require.False(t, mark != "" && prev == mark, "%s:%d: %q is not followed by a ```sh block", page, markLine, mark)
			if strings.HasPrefix(line, "<!-- runnable:") || strings.HasPrefix(line, "<!-- not run:") {
				mark, markLine = line, n
			}
			prev = line
			continue
		}
		start := n
		var body []string
		for sc.Scan() {
			n++
			if sc.Text() == "```" {
				break
			}
			body = append(body, sc.Text())
		}
		script := strings.Join(body, "\n")
		m := runnableMark.FindStringSubmatch(mark)
		switch {
		case m != nil && prev == mark:
			ex := docExample{page: page, line: start, script: script}
			words := strings.Fields(m[1])
			for i := 0; i < len(words); i++ {
				switch w := words[i]; w {
				case "stream":
					ex.stream = true
				case "until":
					ex.until = strings.Join(words[i+1:], " ")
					i = len(words)
				default:
					code, err := strconv.Atoi(w)
					require.NoError(t, err, "%s:%d: %q in the runnable mark", page, markLine, w)
					ex.want = append(ex.want, code)
				}
			}
			if !ex.stream {
				require.Equal(t, len(ex.want), strings.Count(script, "curl "), "%s:%d: one status per curl of the block", page, start)
			}
			// Only the service under test is called: every address a block names outright is a loopback one.
			for _, u := range literalURL.FindAllString(script, -1) {
				p, err := url.Parse(u)
				require.NoError(t, err)
				require.Equal(t, "127.0.0.1", p.Hostname(), "%s:%d: %s is not the loopback address", page, start, u)
			}
			out = append(out, ex)
		case notRunMark.MatchString(mark) && prev == mark:
		default:
			assert.NotContains(t, script, "curl ", "%s:%d: a request the tests do not run: mark it <!-- runnable: STATUS... -->", page, start)
		}
		mark, prev = "", "```"
	}
	require.NoError(t, sc.Err())
	return out
}

// run runs the block with bash in the repository (its examples/ files), against base with the stack's
// tokens and ns as $NS, and returns what it printed and each answer's status.
func (ex docExample) run(base, ns string) (string, []int, error) {
	maxTime, tolerate := "30", ""
	if ex.stream {
		// A stream never ends by itself: cut it off after its first events (curl's exit 28).
		maxTime, tolerate = "3", " || [ $? = 28 ]"
	}
	script := "set -e -o pipefail\ncurl() { command curl -sS --max-time " + maxTime + ` -w '\n@@status %{http_code}\n' "$@"` + tolerate + "; }\n" + ex.script
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = env.root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "NS=" + ns, "RAY_SERVICE_URL=" + base,
		"ADMIN_TOKEN=" + env.tokens["admin"], "VIEWER_TOKEN=" + env.tokens["viewer"], "NOBODY_TOKEN=" + env.tokens["nobody"]}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var codes []int
	for _, m := range statusLine.FindAllStringSubmatch(out.String(), -1) {
		code, _ := strconv.Atoi(m[1])
		codes = append(codes, code)
	}
	return out.String(), codes, err
}

// check runs the block (again, while its until text is missing) and fails the test when it fails or
// answers otherwise than the page says.
func (ex docExample) check(t *testing.T, base, ns string) {
	t.Helper()
	where := fmt.Sprintf("%s:%d", ex.page, ex.line)
	var out string
	var codes []int
	var err error
	done := func() bool {
		out, codes, err = ex.run(base, ns)
		return err == nil && (ex.until == "" || strings.Contains(out, ex.until)) && (len(ex.want) == 0 || slices.Equal(codes, ex.want))
	}
	var problems []string
	if ex.until == "" {
		done()
	} else if !waitFor(time.Minute, done) {
		problems = append(problems, fmt.Sprintf("its output never held %q", ex.until))
	}
	if err != nil {
		problems = append(problems, fmt.Sprintf("the block failed (%v)", err))
	}
	if len(ex.want) > 0 && !slices.Equal(codes, ex.want) {
		problems = append(problems, fmt.Sprintf("it answered %v where the page says %v", codes, ex.want))
	}
	if len(problems) > 0 {
		t.Errorf("%s: %s; it printed:\n%.4000s", where, strings.Join(problems, "; "), out)
	}
}

// runPage runs a page's blocks in their order (each may need what the one before made), against base.
func runPage(t *testing.T, page, base, ns string) {
	t.Helper()
	examples := docExamples(t, page)
	require.NotEmpty(t, examples, "%s runs no request", page)
	for _, ex := range examples {
		ex.check(t, base, ns)
		if t.Failed() {
			return // what follows needs what this made
		}
	}
	t.Logf("%s: %d blocks answered as the page says", page, len(examples))
}

// The pages whose requests need no more than the shared service: each in a namespace of its own. Every
// other page of docs/ runs no request, and leaves none unmarked.
func TestDocsExamples(t *testing.T) {
	shared, own := []string{"quickstart.md", "concepts.md"}, []string{"tasks.md"}
	require.NoError(t, filepath.WalkDir(filepath.Join(env.root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		page, _ := filepath.Rel(filepath.Join(env.root, "docs"), path)
		if !slices.Contains(shared, page) && !slices.Contains(own, page) {
			assert.Empty(t, docExamples(t, page), "%s has runnable requests no test runs: add it to TestDocsExamples", page)
		}
		return nil
	}))
	for _, page := range shared {
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			runPage(t, page, env.serviceURL, namespace(t, "docs"))
		})
	}
}

// The tasks' requests, against a service configured as the tasks say: the stop of idle RayClusters by
// policy on (the chart's idle.stopPolicy.enabled: an identity of its own) and webhooks allowed to the
// loopback range (notifications.allowCIDRs).
func TestDocsTasks(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "docs-tasks")
	ctx := context.Background()
	_, err := env.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "idle-stop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	letServiceAskTokenOf(t, ns, "idle-stop")
	svc := startInstance(t, "ray-service-docs-tasks.log", "--idle-stop-identity="+ns+"/idle-stop", "--notify-allow-cidrs=127.0.0.0/8")
	runPage(t, "tasks.md", svc.url, ns)
}
