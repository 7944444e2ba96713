package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"ray-service/internal/ray"
)

// What one record keeps is bounded, so that the objects of a tenant, however big or busy, move the
// history's volume by a known amount: a record takes at most about MaxRecordBytes.
const (
	// MaxManifestBytes bounds a manifest kept whole; a larger one is kept in part (ManifestCut).
	MaxManifestBytes = 64 << 10
	// MaxMessageBytes bounds a record's status message, and each message of an ending (events,
	// containers).
	MaxMessageBytes = 1 << 10
	// KeptTransitions is how many of an object's first and of its last transitions are kept; those
	// between are dropped, and counted.
	KeptTransitions = 10
	// MaxEndingPods and MaxEndingContainers bound the pods of an ending and the containers of each.
	MaxEndingPods       = 32
	MaxEndingContainers = 8
	// MaxEndingBytes bounds an ending (its log tail of at most 256 KiB included).
	MaxEndingBytes = 512 << 10
	// transitionBytes is what one transition is counted for.
	transitionBytes = 64
	// MaxRecordBytes bounds what one record takes: its row, manifest, ending and transitions.
	MaxRecordBytes = 1<<10 + MaxMessageBytes + MaxManifestBytes + MaxEndingBytes + 2*KeptTransitions*transitionBytes
)

// ManifestCut says that a manifest was not kept whole, and why: what is kept is its apiVersion, kind,
// name and namespace; Size and SHA256 are those of the whole manifest (JSON, as it was recorded).
type ManifestCut struct {
	Size   int64  `json:"size" example:"1048576"`
	SHA256 string `json:"sha256" example:"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"`
	Reason string `json:"reason" example:"past the history's bound of 64 KiB a manifest"`
}

// boundManifest returns spec, or what is kept of it when it is past MaxManifestBytes.
func boundManifest(spec string) (string, *ManifestCut) {
	if len(spec) <= MaxManifestBytes {
		return spec, nil
	}
	return cutManifest(spec, fmt.Sprintf("past the history's bound of %d KiB a manifest", MaxManifestBytes>>10))
}

// cutManifest returns what is kept of a manifest not kept whole: its apiVersion, kind, name and
// namespace, with how big it was, its sha256 and why.
func cutManifest(spec, why string) (string, *ManifestCut) {
	sum := sha256.Sum256([]byte(spec))
	cut := &ManifestCut{Size: int64(len(spec)), SHA256: hex.EncodeToString(sum[:]), Reason: why}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal([]byte(spec), &m)
	b, err := json.Marshal(map[string]any{"apiVersion": m.APIVersion, "kind": m.Kind,
		"metadata": map[string]string{"name": m.Metadata.Name, "namespace": m.Metadata.Namespace}})
	if err != nil {
		return "{}", cut
	}
	return string(b), cut
}

// clip returns s cut to at most n bytes, at a rune's start, marked with an ellipsis when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n - len("…")
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}

// boundEnding cuts an ending to its bounds: each message to MaxMessageBytes, the pods and their
// containers to MaxEndingPods and MaxEndingContainers, and the whole to MaxEndingBytes (the log tail
// first, then the last pods and events). What was left out is counted in the ending.
func boundEnding(e *ray.Ending) *ray.Ending {
	if e == nil {
		return nil
	}
	out := *e
	out.Events = make([]ray.EventInfo, len(e.Events))
	for i, ev := range e.Events {
		ev.Message, ev.Reason = clip(ev.Message, MaxMessageBytes), clip(ev.Reason, 256)
		out.Events[i] = ev
	}
	pods := e.Pods
	if len(pods) > MaxEndingPods {
		out.PodsOmitted += len(pods) - MaxEndingPods
		pods = pods[:MaxEndingPods]
	}
	out.Pods = make([]ray.PodEnd, len(pods))
	for i, p := range pods {
		cs := p.Containers
		if len(cs) > MaxEndingContainers {
			cs = cs[:MaxEndingContainers]
		}
		p.Containers = make([]ray.ContainerEnd, len(cs))
		for j, c := range cs {
			c.Message, c.Reason = clip(c.Message, MaxMessageBytes), clip(c.Reason, 256)
			p.Containers[j] = c
		}
		out.Pods[i] = p
	}
	size := func() int {
		b, _ := json.Marshal(&out)
		return len(b)
	}
	if out.Log != nil && size() > MaxEndingBytes {
		out.Log = nil
		out.LogOmitted = fmt.Sprintf("the ending was past the history's bound of %d KiB", MaxEndingBytes>>10)
	}
	for size() > MaxEndingBytes && (len(out.Pods) > 0 || len(out.Events) > 0) {
		if len(out.Pods) > 0 {
			out.Pods = out.Pods[:len(out.Pods)-1]
			out.PodsOmitted++
		} else {
			out.Events = out.Events[:len(out.Events)-1]
		}
	}
	return &out
}

// clipRecord cuts what a record's row keeps to its bounds.
func clipRecord(r *Record) {
	r.Reason, r.Message, r.Creator = clip(r.Reason, 256), clip(r.Message, MaxMessageBytes), clip(r.Creator, 256)
}
