//go:build integration

package integration

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// standIn is a stand-in for the Ray dashboards of every Ray cluster: it speaks enough of Ray's Jobs and
// Serve REST APIs for the KubeRay operator and the service. Both reach it as their HTTP proxy (the
// stack's OPERATOR_HTTP_PROXY, a loopback address), so requests arrive in proxy form with the in-cluster
// address of the dashboard in the URL, and no name is ever resolved.
type standIn struct {
	srv *http.Server

	mu       sync.Mutex
	jobs     map[string]map[string]*fakeJob // dashboard host -> job id -> job
	requests []seenRequest
}

type fakeJob struct {
	ID, Entrypoint, Status string
	Start, End             int64
}

type seenRequest struct {
	Method, Host, Path string
	// Credentials tells whether the request carried an Authorization or X-OpenFuyao-Authorization header.
	Credentials bool
}

// startStandIn listens on addr (host:port) until the test binary ends.
func startStandIn(addr string) (*standIn, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &standIn{jobs: map[string]map[string]*fakeJob{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

var jobPath = regexp.MustCompile(`^/api/jobs/?([^/]*)(/stop|/logs)?/?$`)

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Host
	if host == "" {
		host = r.Host
	}
	host = strings.Split(host, ":")[0]
	if r.URL.Path == "/slow" { // a dashboard that does not answer in time (served outside the lock)
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, seenRequest{Method: r.Method, Host: host, Path: r.URL.Path,
		Credentials: r.Header.Get("Authorization") != "" || r.Header.Get("X-OpenFuyao-Authorization") != ""})
	table := s.jobs[host]
	if table == nil {
		table = map[string]*fakeJob{}
		s.jobs[host] = table
	}
	now := time.Now().UnixMilli()
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch p := r.URL.Path; {
	case p == "/":
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<html><head><script src="./static/main.js"></script></head><body>Ray Dashboard of ` + host + `</body></html>`))
	case p == "/api/echo" && r.Method == http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		reply(200, map[string]string{"echo": string(b), "query": r.URL.RawQuery})
	case p == "/hostile":
		// What whoever controls a head pod could answer: a cookie for the console's origin, and a page
		// whose script reads through its own dashboard (allowed) and calls the console's API (refused).
		http.SetCookie(w, &http.Cookie{Name: "console-session", Value: "planted", Path: "/"})
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(hostilePage))
	case p == "/redirect-away":
		http.Redirect(w, r, "http://attacker.example/phish", http.StatusFound)
	case p == "/redirect-root":
		http.Redirect(w, r, "/api/version", http.StatusFound)
	case strings.HasPrefix(p, "/api/version"):
		reply(200, map[string]string{"version": "standin", "ray_version": "2.46.0", "ray_commit": "standin"})
	case strings.HasPrefix(p, "/api/serve/applications"):
		if r.Method == http.MethodPut {
			reply(200, map[string]string{})
			return
		}
		reply(200, map[string]any{"applications": map[string]any{
			"hello": map[string]any{"name": "hello", "route_prefix": "/", "status": "RUNNING", "message": "",
				"deployments": map[string]any{"Hello": map[string]string{"name": "Hello", "status": "HEALTHY", "message": ""}}},
		}})
	case jobPath.MatchString(p):
		m := jobPath.FindStringSubmatch(p)
		id, action := m[1], m[2]
		switch {
		case id == "" && r.Method == http.MethodPost: // HTTPMode submission
			var body struct {
				Entrypoint   string `json:"entrypoint"`
				SubmissionID string `json:"submission_id"`
			}
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			table[body.SubmissionID] = &fakeJob{ID: body.SubmissionID, Entrypoint: body.Entrypoint, Status: "RUNNING", Start: now}
			reply(200, map[string]string{"job_id": body.SubmissionID, "submission_id": body.SubmissionID})
		case id == "":
			list := []any{}
			for _, j := range table {
				list = append(list, j.info())
			}
			reply(200, list)
		case action == "/stop":
			j := table[id]
			if j == nil {
				reply(404, map[string]string{"error": "no such job"})
				return
			}
			stopped := j.Status == "RUNNING" || j.Status == "PENDING"
			if stopped {
				j.Status, j.End = "STOPPED", now
			}
			reply(200, map[string]bool{"stopped": stopped})
		case action == "/logs":
			reply(200, map[string]string{"logs": ""})
		case r.Method == http.MethodDelete:
			delete(table, id)
			reply(200, map[string]bool{"deleted": true})
		default:
			j := table[id]
			if j == nil { // K8sJobMode: as if the submitter had submitted it
				j = &fakeJob{ID: id, Status: "RUNNING", Start: now}
				table[id] = j
			}
			reply(200, j.info())
		}
	default:
		reply(404, map[string]string{"error": "not found: " + p})
	}
}

// hostilePage reports in its own DOM what its script could reach: its dashboard's API through the proxy
// (relative), and the console's API on the same origin.
const hostilePage = `<html><head><title>hostile</title></head><body><div id="dash">pending</div><div id="console">pending</div>
<script>
fetch("./api/version").then(r => r.json()).then(j => { document.getElementById("dash").textContent = "dashboard:" + j.version })
  .catch(e => { document.getElementById("dash").textContent = "dashboard:blocked" });
fetch("/rest/ray/v1/rayclusters").then(r => { document.getElementById("console").textContent = "console:" + r.status })
  .catch(e => { document.getElementById("console").textContent = "console:blocked" });
</script></body></html>`

func (j *fakeJob) info() map[string]any {
	info := map[string]any{"job_id": j.ID, "submission_id": j.ID, "status": j.Status, "entrypoint": j.Entrypoint,
		"message": "stand-in job " + strings.ToLower(j.Status), "type": "SUBMISSION", "start_time": j.Start}
	if j.End != 0 {
		info["end_time"] = j.End
	}
	return info
}

// finish sets the status of every job of a Ray cluster's dashboard whose host starts with prefix.
func (s *standIn) finish(hostPrefix, status string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for host, table := range s.jobs {
		if strings.HasPrefix(host, hostPrefix) {
			for _, j := range table {
				j.Status, j.End = status, time.Now().UnixMilli()
				n++
			}
		}
	}
	return n
}

// seen counts the requests matching method and a path suffix made to hosts starting with prefix.
func (s *standIn) seen(method, hostPrefix, pathSuffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method && strings.HasPrefix(r.Host, hostPrefix) && strings.HasSuffix(strings.TrimSuffix(r.Path, "/"), pathSuffix) {
			n++
		}
	}
	return n
}

// credentialsSeen tells whether any request to hosts starting with prefix carried credentials.
func (s *standIn) credentialsSeen(hostPrefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if strings.HasPrefix(r.Host, hostPrefix) && r.Credentials {
			return true
		}
	}
	return false
}
