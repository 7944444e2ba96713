package promql

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Window is the time range of an overview: from Start to End, a point every Step.
type Window struct {
	Start time.Time     `json:"start"`
	End   time.Time     `json:"end"`
	Step  time.Duration `json:"-"`
	// StepSeconds is Step for the JSON answer.
	StepSeconds float64 `json:"stepSeconds"`
}

// Ranges are the named windows and their steps.
var Ranges = map[string]struct{ Length, Step time.Duration }{
	"10m": {10 * time.Minute, 15 * time.Second},
	"30m": {30 * time.Minute, 30 * time.Second},
	"1h":  {time.Hour, time.Minute},
	"3h":  {3 * time.Hour, 2 * time.Minute},
	"6h":  {6 * time.Hour, 5 * time.Minute},
	"12h": {12 * time.Hour, 10 * time.Minute},
	"24h": {24 * time.Hour, 20 * time.Minute},
	"7d":  {7 * 24 * time.Hour, 2 * time.Hour},
}

// MaxPoints bounds the points of one series, as Prometheus does; MaxWindow the length of a window.
const (
	MaxPoints = 11000
	MaxWindow = 30 * 24 * time.Hour
)

// ParseWindow reads a window: a named range ending now, or explicit start, end and step (RFC 3339 or
// Unix seconds; step as a Go duration or seconds). A named window's ends are aligned to its step, so
// that repeated calls ask Prometheus the same question.
func ParseWindow(rng, start, end, step string, now time.Time) (Window, error) {
	if start != "" || end != "" {
		if rng != "" {
			return Window{}, errors.New("give either range or start and end, not both")
		}
		s, err := parseTime("start", start)
		if err != nil {
			return Window{}, err
		}
		e, err := parseTime("end", end)
		if err != nil {
			return Window{}, err
		}
		if !e.After(s) {
			return Window{}, errors.New("end must be after start")
		}
		if e.Sub(s) > MaxWindow {
			return Window{}, fmt.Errorf("the window from start to end is %s long: at most %s (30 days)", e.Sub(s), MaxWindow)
		}
		st := defaultStep(e.Sub(s))
		if step != "" {
			if st, err = parseStep(step); err != nil {
				return Window{}, err
			}
		}
		if st > e.Sub(s) {
			return Window{}, fmt.Errorf("step %s is longer than the window (%s)", st, e.Sub(s))
		}
		if e.Sub(s)/st > MaxPoints {
			return Window{}, fmt.Errorf("step %s gives more than %d points over the window: use a larger step", st, MaxPoints)
		}
		return Window{Start: s, End: e, Step: st, StepSeconds: st.Seconds()}, nil
	}
	if step != "" {
		return Window{}, errors.New("step goes with start and end")
	}
	if rng == "" {
		rng = "30m"
	}
	r, ok := Ranges[rng]
	if !ok {
		return Window{}, fmt.Errorf("range %q: want one of 10m, 30m, 1h, 3h, 6h, 12h, 24h, 7d", rng)
	}
	e := now.UTC().Truncate(r.Step)
	return Window{Start: e.Add(-r.Length), End: e, Step: r.Step, StepSeconds: r.Step.Seconds()}, nil
}

func defaultStep(length time.Duration) time.Duration {
	names := make([]string, 0, len(Ranges))
	for n := range Ranges {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return Ranges[names[i]].Length < Ranges[names[j]].Length })
	for _, n := range names {
		if length <= Ranges[n].Length {
			return Ranges[n].Step
		}
	}
	return length / 100
}

// ParseTime reads the time parameter name: RFC 3339 or Unix seconds.
func ParseTime(name, v string) (time.Time, error) { return parseTime(name, v) }

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("%s is missing", name)
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Unix(0, int64(f*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want RFC 3339 or Unix seconds", name, v)
}

func parseStep(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return 0, fmt.Errorf("step %q: want a duration such as 30s or a number of seconds", v)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < time.Second {
		return 0, fmt.Errorf("step %q: at least 1s", v)
	}
	return d, nil
}
