package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"ray-service/internal/promql"
	"ray-service/internal/ray"
)

// What gcs_server prints of its main event loop every event_stats_print_interval_ms (60 s by default;
// src/ray/gcs/gcs_server.cc, src/ray/common/event_stats.cc StatsString in the Ray sources), as the
// openFuyao Ray guide's Fluent Bit script reads it: a line
//
//	[2025-11-30 10:00:00,123 I 1234 1234] (gcs_server) gcs_server.cc:957: Main service Event stats:
//
// two empty lines, then "Global stats: 32 total (13 active)" and "Queueing time: mean = 45.12ms, max =
// ..." (Ray 2.10 and later print milliseconds with two decimals; 2.9 and before three decimals, a
// space and a unit of ns, us, ms or s: "mean = 280.820 us"), then the events' rows. The head's log
// API serves the file: GET /api/v0/logs/file?node_ip=...&filename=gcs_server.out&lines=N
// (python/ray/dashboard/modules/state/state_head.py); Ray before 2.10 prefixes each chunk it streams
// with "1" (and "0" before an error).

// GCSLogLines bounds the lines of gcs_server.out read at once (each print is a few hundred lines).
const GCSLogLines = 20000

// maxGCSLog bounds what is kept of the answer: its last bytes, the newest prints (a print cut at the
// start is passed over).
const maxGCSLog = 8 << 20

// maxGCSAnswer bounds what is read of the answer at all: GCSLogLines lines of gcs_server.out are a few
// MiB (a print's rows are a few hundred bytes), so an answer beyond is no log of Ray's, and a head that
// streams without end is left before the call's time runs out.
const maxGCSAnswer = 4 * maxGCSLog

var (
	statsHeader = regexp.MustCompile(`^1?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) [A-Z] \d+ \d+\] \(gcs_server\) [^ ]+: Main service Event stats:\s*$`)
	globalStats = regexp.MustCompile(`^1?Global stats: (\d+) total \((\d+) active\)`)
	queueing    = regexp.MustCompile(`^1?Queueing time: mean = (-?[0-9.]+) ?(ns|us|µs|ms|s)\b`)
)

// ParseEventStats reads the main loop's event stats printed in a gcs_server.out (times in loc: Ray
// prints the head's local time), oldest first. A print cut short (the log's first lines) is left out.
func ParseEventStats(r io.Reader, loc *time.Location) ([]promql.LoopPrint, error) {
	var out []promql.LoopPrint
	var cur *promql.LoopPrint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	haveGlobal := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := statsHeader.FindStringSubmatch(line); m != nil {
			at, err := time.ParseInLocation("2006-01-02 15:04:05", m[1], loc)
			if err != nil {
				continue
			}
			ms, _ := strconv.Atoi(m[2])
			cur, haveGlobal = &promql.LoopPrint{At: at.Add(time.Duration(ms) * time.Millisecond)}, false
			continue
		}
		if cur == nil {
			continue
		}
		if m := globalStats.FindStringSubmatch(line); m != nil {
			// Counts an int64 does not hold are no print of Ray's: the print is left out.
			var errTotal, errActive error
			cur.Total, errTotal = strconv.ParseInt(m[1], 10, 64)
			cur.Active, errActive = strconv.ParseInt(m[2], 10, 64)
			haveGlobal = errTotal == nil && errActive == nil
			continue
		}
		if m := queueing.FindStringSubmatch(line); m != nil && haveGlobal {
			v, err := strconv.ParseFloat(m[1], 64)
			v *= map[string]float64{"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1, "s": 1e3}[m[2]]
			// A time no float holds (JSON has no infinity) or below zero is no print of Ray's either.
			if err == nil && v >= 0 && !math.IsInf(v, 0) {
				cur.QueueingMeanMs = v
				out = append(out, *cur)
			}
			cur = nil
		}
	}
	return out, sc.Err()
}

// GCSEventStats reads the event stats gcs_server printed on the head node at nodeIP, through the Ray
// dashboard at addr (host:port), with the cluster's token where it takes one ("": none). The error says,
// in the service's words, what the dashboard did; nothing the dashboard wrote reaches it. A 401 to a
// read sent without a token is ray.ErrTokenRequired.
func (d *Dashboards) GCSEventStats(ctx context.Context, addr, nodeIP, rayToken string) ([]promql.LoopPrint, error) {
	const call = "read gcs_server.out"
	q := url.Values{"node_ip": {nodeIP}, "filename": {"gcs_server.out"}, "lines": {strconv.Itoa(GCSLogLines)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v0/logs/file?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if rayToken != "" {
		req.Header.Set(ray.AuthHeader, "Bearer "+rayToken)
	}
	res, err := d.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the Ray dashboard %w", d.unreachable(addr, call, err))
	}
	defer res.Body.Close()
	if isRedirect(res.StatusCode) {
		d.logAnswer(addr, call, res, rayToken)
		return nil, fmt.Errorf("the Ray dashboard answered with a redirect (%s) for gcs_server.out, which the service does not follow", statusOf(res.StatusCode))
	}
	if res.StatusCode != http.StatusOK {
		d.logAnswer(addr, call, res, rayToken)
		if res.StatusCode == http.StatusUnauthorized && rayToken == "" {
			return nil, fmt.Errorf("%w (%s for gcs_server.out)", ray.ErrTokenRequired, statusOf(res.StatusCode))
		}
		return nil, fmt.Errorf("the Ray dashboard answered %s for gcs_server.out", statusOf(res.StatusCode))
	}
	body, read, err := lastBytes(io.LimitReader(res.Body, maxGCSAnswer+1), maxGCSLog)
	if err != nil {
		return nil, fmt.Errorf("reading gcs_server.out from the Ray dashboard: %w", d.unreachable(addr, call, err))
	}
	if read > maxGCSAnswer {
		return nil, fmt.Errorf("the Ray dashboard's answer for gcs_server.out went on beyond %d MiB, which %d lines of it never take; it was left", maxGCSAnswer>>20, GCSLogLines)
	}
	// Ray before 2.10 streams each chunk (of whole lines) after a "1", which the parser passes over, or
	// "0" and the error.
	if rest, ok := bytes.CutPrefix(body, []byte("0")); ok && bytes.Contains(rest[:min(len(rest), 200)], []byte("error")) {
		if d.Log != nil {
			d.Log.Info("a Ray dashboard could not read gcs_server.out", zap.String("address", addr), zap.String("error", excerpt(rest[:min(len(rest), excerptRead)], rayToken)))
		}
		return nil, errors.New("the Ray dashboard could not read gcs_server.out (its error is in the service's log)")
	}
	prints, err := ParseEventStats(bytes.NewReader(body), time.UTC)
	if len(prints) > maxGCSPrints {
		prints = prints[len(prints)-maxGCSPrints:]
	}
	return prints, err
}

// maxGCSPrints bounds the prints taken from one answer, and so the series a health answer carries: a
// week of prints a minute (the longest window), where a head that prints at every line would fill the
// answer with them.
const maxGCSPrints = 7 * 24 * 60

// lastBytes reads r to its end and keeps its last limit bytes: the log's newest lines, which the API
// sends last; limit bounds what it keeps. It says how many bytes it read.
func lastBytes(r io.Reader, limit int) ([]byte, int64, error) {
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 64<<10)
	var read int64
	for {
		n, err := r.Read(chunk)
		read += int64(n)
		buf = append(buf, chunk[:n]...)
		if len(buf) > 2*limit {
			buf = append(buf[:0], buf[len(buf)-limit:]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, read, err
		}
	}
	if len(buf) > limit {
		buf = buf[len(buf)-limit:]
	}
	return buf, read, nil
}
